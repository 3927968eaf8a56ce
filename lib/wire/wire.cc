#include "lib/wire/frame_view.h"
