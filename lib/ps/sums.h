// lib/ps/sums.h: the PS's arithmetic on fragments (ATP-SPEC section 6).
//
// Integer path: contributions are added exactly in int64 (1,024 contributions
// of int32 cannot overflow it). A contribution holding INT32_MAX or INT32_MIN
// was saturated by a switch (workers never send the bounds: include/atp/
// quantize.h), and a sum outside the open int32 range cannot be delivered
// exactly: both send the seq to the float path.
//
// Float path: every worker's float32 values are kept in worker order and
// summed in double in that order, so the result does not depend on arrival
// order, then rounded once to float32.
#ifndef ATP_LIB_PS_SUMS_H_
#define ATP_LIB_PS_SUMS_H_

#include <array>
#include <cstdint>
#include <span>

#include "atp/wire.h"

namespace atp::ps {

using IntSums = std::array<int64_t, wire::kValuesPerFragment>;

// HasInt32Bound: some value of an integer payload is INT32_MAX or INT32_MIN.
bool HasInt32Bound(const wire::Payload& payload);

// AssignSums / AddToSums: sums = payload, sums += payload (int32 values).
void AssignSums(const wire::Payload& payload, IntSums& sums);
void AddToSums(const wire::Payload& payload, IntSums& sums);

// SumsFitOpenInt32: every sum lies strictly between INT32_MIN and INT32_MAX.
bool SumsFitOpenInt32(const IntSums& sums);

// StoreInt32Sums: out = the sums as int32 (each must fit).
void StoreInt32Sums(const IntSums& sums, wire::Payload& out);

// StoreFloatRow: row[0..61] = the float32 values of an fp payload.
void StoreFloatRow(const wire::Payload& payload, float* row);

// SumFloatRowsInOrder: out[v] = float32 bits of the double sum, in row order,
// of rows[w * 62 + v] for w = 0..rows_count-1 (rows_count >= 1).
void SumFloatRowsInOrder(const float* rows, int rows_count, wire::Payload& out);
// SumFloatRows: the same over the rows `order` names, in that order
// (order.size() >= 1).
void SumFloatRows(const float* rows, std::span<const uint16_t> order, wire::Payload& out);

}  // namespace atp::ps

#endif  // ATP_LIB_PS_SUMS_H_
