#include "atp/quantize.h"
