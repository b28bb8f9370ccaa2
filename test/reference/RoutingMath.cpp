//===- RoutingMath.cpp - the routing exp/log of docs/routing-numerics.md --===//

#include "test/reference/RoutingMath.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace moe {
namespace ref {
namespace {

// The constants of the definition, as exact hexadecimal doubles.
const double LN2_HI = 0x1.62e42fee00000p-1;
const double LN2_LO = 0x1.a39ef35793c76p-33;
const double LOG2E = 0x1.71547652b82fep+0;
const double SQRT2 = 0x1.6a09e667f3bcdp+0;
const double SHIFT = 0x1.8p+52;
// E[i]: the double nearest to 1/i!, i = 0..13.
const double E[14] = {
    0x1.0000000000000p+0, 0x1.0000000000000p+0, 0x1.0000000000000p-1,
    0x1.5555555555555p-3, 0x1.5555555555555p-5, 0x1.1111111111111p-7,
    0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16,
    0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26,
    0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33};
// L[i]: the double nearest to 2/(2i+3), i = 0..10.
const double L[11] = {
    0x1.5555555555555p-1, 0x1.999999999999ap-2, 0x1.2492492492492p-2,
    0x1.c71c71c71c71cp-3, 0x1.745d1745d1746p-3, 0x1.3b13b13b13b14p-3,
    0x1.1111111111111p-3, 0x1.e1e1e1e1e1e1ep-4, 0x1.af286bca1af28p-4,
    0x1.8618618618618p-4, 0x1.642c8590b2164p-4};

uint64_t bitsOf(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
double fromBits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

} // namespace

float routingExp(float x) {
  if (std::isnan(x))
    return x;
  double a = double(x);
  if (a < -160.0)
    a = -160.0;
  if (a > 100.0)
    a = 100.0;
  // Every multiply-add below is a std::fma; the file is compiled with
  // -ffp-contract=off so that nothing else is fused.
  const double k = std::fma(a, LOG2E, SHIFT) - SHIFT;
  double r = std::fma(-k, LN2_HI, a);
  r = std::fma(-k, LN2_LO, r);
  double p = E[13];
  for (int i = 12; i >= 0; --i)
    p = std::fma(p, r, E[i]);
  const int64_t ki = int64_t(k);
  const double scale = fromBits(uint64_t(ki + 1023) << 52);
  const double y = p * scale;
  return float(y); // round to nearest even
}

float routingLog(float x) {
  if (std::isnan(x) || x < 0.0f)
    return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f)
    return -std::numeric_limits<float>::infinity();
  if (std::isinf(x))
    return x;
  const uint64_t u = bitsOf(double(x));
  int64_t e = int64_t(u >> 52) - 1023;
  double m = fromBits((u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
  if (m > SQRT2) {
    m = m * 0.5;
    e = e + 1;
  }
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double p = L[10];
  for (int i = 9; i >= 0; --i)
    p = std::fma(p, z, L[i]);
  const double sz = s * z;
  const double logm = std::fma(sz, p, s * 2.0);
  const double ed = double(e);
  const double y = std::fma(ed, LN2_HI, std::fma(ed, LN2_LO, logm));
  return float(y);
}

float routingSigmoid(float x) {
  const float d = 1.0f + routingExp(-x);
  return 1.0f / d;
}

} // namespace ref
} // namespace moe
