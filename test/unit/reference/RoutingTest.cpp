//===- RoutingTest.cpp - Router, top-k, MOESART sampling and weights ------===//

#include "test/reference/MoEReference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

using namespace moe::ref;

namespace {

std::vector<double> randomLogits(TestRng &rng, int64_t n, double scale) {
  std::vector<double> o(static_cast<size_t>(n));
  for (double &v : o)
    v = rng.normal() * scale;
  return o;
}

double sumOf(const std::vector<double> &v) {
  double s = 0;
  for (double x : v)
    s += x;
  return s;
}

TEST(Softmax, RowsSumToOne) {
  TestRng rng(1);
  for (int row = 0; row < 200; ++row) {
    const int64_t n = 1 + row % 17;
    std::vector<double> o = randomLogits(rng, n, row < 100 ? 1.0 : 300.0);
    std::vector<double> g = softmax(o.data(), n);
    EXPECT_NEAR(sumOf(g), 1.0, 1e-12);
    for (double v : g) {
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 1.0);
    }
  }
}

TEST(Softmax, MaxSubtractedIsStable) {
  const double o[3] = {1000.0, 1000.0, 999.0};
  std::vector<double> g = softmax(o, 3);
  // exp(0), exp(0), exp(-1) normalised.
  const double z = 2.0 + std::exp(-1.0);
  EXPECT_NEAR(g[0], 1.0 / z, 1e-15);
  EXPECT_NEAR(g[1], 1.0 / z, 1e-15);
  EXPECT_NEAR(g[2], std::exp(-1.0) / z, 1e-15);
}

TEST(TopK, RankOrderAndTiesLowerIndexFirst) {
  const double v[6] = {1.0, 3.0, 3.0, 2.0, 3.0, -1.0};
  EXPECT_EQ(topKIndices(v, 6, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(topKIndices(v, 6, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(topKIndices(v, 6, 4), (std::vector<int64_t>{1, 2, 4, 3}));
  EXPECT_EQ(topKIndices(v, 6, 6), (std::vector<int64_t>{1, 2, 4, 3, 0, 5}));
  const double same[4] = {0.5, 0.5, 0.5, 0.5};
  EXPECT_EQ(topKIndices(same, 4, 3), (std::vector<int64_t>{0, 1, 2}));
}

TEST(Routing, DenseIsSoftmax) {
  TestRng rng(2);
  std::vector<double> o = randomLogits(rng, 8, 1.0);
  TokenRouting r = routeToken(o.data(), 8, Routing::dense(), false, 0, 0);
  std::vector<double> g = softmax(o.data(), 8);
  ASSERT_EQ(r.selected.size(), 8u);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(r.selected[size_t(i)], i);
    EXPECT_EQ(r.weights[size_t(i)], g[size_t(i)]);
  }
  EXPECT_TRUE(std::isinf(r.decisionMargin));
}

TEST(Routing, TopKWeightsAreRenormalisedExp) {
  // o = {0, ln 2, ln 3, -5}: top-2 = {2, 1}, weights 3/5, 2/5.
  const double o[4] = {0.0, std::log(2.0), std::log(3.0), -5.0};
  TokenRouting r = routeToken(o, 4, Routing::topK(2), false, 0, 0);
  EXPECT_EQ(r.selected, (std::vector<int64_t>{2, 1}));
  EXPECT_NEAR(r.weights[0], 0.6, 1e-15);
  EXPECT_NEAR(r.weights[1], 0.4, 1e-15);
  EXPECT_NEAR(r.decisionMargin, std::log(2.0), 1e-15);
}

TEST(Routing, TopKEqualsDenseWhenKIsE) {
  TestRng rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> o = randomLogits(rng, 6, 2.0);
    TokenRouting d = routeToken(o.data(), 6, Routing::dense(), false, 0, 0);
    TokenRouting k = routeToken(o.data(), 6, Routing::topK(6), false, 0, 0);
    ASSERT_EQ(k.selected.size(), 6u);
    for (size_t i = 0; i < 6; ++i)
      EXPECT_NEAR(k.weights[i], d.weights[size_t(k.selected[i])], 1e-15);
  }
}

TEST(Routing, MoesartInferenceWeightsAboutOneOverK) {
  TestRng rng(4);
  for (int64_t K : {1, 2, 3, 4}) {
    for (int trial = 0; trial < 100; ++trial) {
      std::vector<double> o = randomLogits(rng, 16, 1.0);
      TokenRouting r =
          routeToken(o.data(), 16, Routing::moesart(K), false, 0, 0);
      // Same experts as top-k.
      EXPECT_EQ(r.selected, topKIndices(o.data(), 16, K));
      for (double w : r.weights)
        EXPECT_NEAR(w, 1.0 / double(K), 1e-6);
    }
  }
}

TEST(Routing, MoesartInferenceFormula) {
  // softmax_S(o_i - log(max(K (g_i + 1e-10), 1e-10))), checked on a tiny
  // case where g_1 is so small that the 1e-10 matters.
  const double o[3] = {0.0, -40.0, 0.5};
  std::vector<double> g = softmax(o, 3);
  TokenRouting r = routeToken(o, 3, Routing::moesart(3), false, 0, 0);
  EXPECT_EQ(r.selected, (std::vector<int64_t>{2, 0, 1}));
  double a[3], z = 0;
  for (int i = 0; i < 3; ++i) {
    int64_t e = r.selected[size_t(i)];
    a[i] = std::exp(o[e] - std::log(3.0 * (g[size_t(e)] + 1e-10)));
    z += a[i];
  }
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(r.weights[size_t(i)], a[i] / z, 1e-15);
  EXPECT_LT(r.weights[2], 0.3); // g_1 ~ 1.6e-18: the 1e-10 term dominates
}

TEST(Routing, SmallRandomClosedForm) {
  TestRng rng(5);
  for (int64_t K : {2, 3, 4}) {
    for (uint32_t t = 0; t < 300; ++t) {
      std::vector<double> o = randomLogits(rng, 8, 1.0);
      std::vector<double> g = softmax(o.data(), 8);
      TokenRouting r = routeToken(o.data(), 8,
                                  Routing::moesart(K, Adjust::SmallRandom),
                                  true, 1234, t);
      ASSERT_EQ(int64_t(r.selected.size()), K);
      ASSERT_NE(std::find(r.selected.begin(), r.selected.end(), r.pickedJ),
                r.selected.end());
      const double gj = g[size_t(r.pickedJ)];
      for (size_t i = 0; i < r.selected.size(); ++i) {
        if (r.selected[i] == r.pickedJ) {
          EXPECT_NEAR(r.weights[i], gj / (1.0 + gj), 1e-8);
        } else {
          EXPECT_NEAR(r.weights[i], 1.0 / (double(K - 1) * (1.0 + gj)), 1e-8);
        }
      }
      EXPECT_NEAR(sumOf(r.weights), 1.0, 1e-12);
    }
  }
}

TEST(Routing, SmallRandomPickIsFloorUKthInAscendingOrder) {
  const uint64_t seed = 99;
  for (uint32_t t = 0; t < 200; ++t) {
    std::vector<int64_t> sel = {7, 2, 5};
    const float u = philoxUniform(seed, t, 3); // draw r = K = 3
    const int pos = int(u * 3.0f);             // floor, u in [0, 1)
    const int64_t ascending[3] = {2, 5, 7};
    EXPECT_EQ(smallRandomPick(sel, seed, t), ascending[pos]);
  }
}

TEST(Routing, ZeroAdjustIsAboutOneOverK) {
  TestRng rng(6);
  for (uint32_t t = 0; t < 200; ++t) {
    std::vector<double> o = randomLogits(rng, 8, 1.0);
    TokenRouting r = routeToken(o.data(), 8, Routing::moesart(3, Adjust::Zero),
                                true, 7, t);
    EXPECT_EQ(r.pickedJ, -1);
    for (double w : r.weights)
      EXPECT_NEAR(w, 1.0 / 3.0, 1e-6);
  }
}

TEST(Routing, LargeAdjustIsRenormalisedG) {
  TestRng rng(7);
  for (uint32_t t = 0; t < 200; ++t) {
    std::vector<double> o = randomLogits(rng, 8, 1.0);
    std::vector<double> g = softmax(o.data(), 8);
    TokenRouting r = routeToken(o.data(), 8,
                                Routing::moesart(3, Adjust::Large), true, 7, t);
    double s = 0;
    for (int64_t e : r.selected)
      s += g[size_t(e)];
    for (size_t i = 0; i < r.selected.size(); ++i)
      EXPECT_NEAR(r.weights[i], g[size_t(r.selected[i])] / s, 1e-15);
  }
}

TEST(Routing, TrainingSelectionIndependentOfAdjust) {
  TestRng rng(8);
  for (uint32_t t = 0; t < 100; ++t) {
    std::vector<double> o = randomLogits(rng, 8, 1.0);
    TokenRouting a = routeToken(o.data(), 8, Routing::moesart(3, Adjust::Zero),
                                true, 11, t);
    TokenRouting b = routeToken(o.data(), 8, Routing::moesart(3, Adjust::Large),
                                true, 11, t);
    TokenRouting c = routeToken(
        o.data(), 8, Routing::moesart(3, Adjust::SmallRandom), true, 11, t);
    EXPECT_EQ(a.selected, b.selected);
    EXPECT_EQ(a.selected, c.selected);
  }
}

TEST(Routing, TopKTrainingEqualsInference) {
  TestRng rng(9);
  std::vector<double> o = randomLogits(rng, 8, 1.0);
  TokenRouting a = routeToken(o.data(), 8, Routing::topK(2), false, 0, 3);
  TokenRouting b = routeToken(o.data(), 8, Routing::topK(2), true, 55, 3);
  EXPECT_EQ(a.selected, b.selected);
  EXPECT_EQ(a.weights, b.weights);
}

//===----------------------------------------------------------------------===//
// Sampling
//===----------------------------------------------------------------------===//

TEST(Sampling, FirstDrawFollowsTheDefinition) {
  // The first draw is the first i with u < cumsum(g)_i.
  const float g[4] = {0.125f, 0.25f, 0.5f, 0.125f}; // exact cumsums
  const float c[4] = {0.125f, 0.375f, 0.875f, 1.0f};
  for (uint32_t t = 0; t < 500; ++t) {
    std::vector<int64_t> s = sampleWithoutReplacementF32(g, 4, 1, 5, t);
    const float u = philoxUniform(5, t, 0);
    int64_t want = 0;
    while (!(u < c[want]))
      ++want;
    EXPECT_EQ(s[0], want);
  }
}

TEST(Sampling, SecondDrawUsesRenormalisedDistribution) {
  // After removing expert 2 (p = 0.5) the rest is {0.25, 0.5, 0, 0.25}
  // (renormalised by 0.5 + 1e-10f == 0.5f in f32).
  const float g[4] = {0.125f, 0.25f, 0.5f, 0.125f};
  int checked = 0;
  for (uint32_t t = 0; t < 500; ++t) {
    std::vector<int64_t> s = sampleWithoutReplacementF32(g, 4, 2, 5, t);
    if (s[0] != 2)
      continue;
    const float u = philoxUniform(5, t, 1);
    const int64_t want = u < 0.25f ? 0 : (u < 0.75f ? 1 : 3);
    EXPECT_EQ(s[1], want);
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(Sampling, NeverRepeatsAndNeverPicksZeroProbability) {
  const double g[6] = {0.5, 0.0, 0.3, 0.0, 0.2, 0.0};
  for (SamplingPrecision p : {SamplingPrecision::F32, SamplingPrecision::F64}) {
    for (uint32_t t = 0; t < 2000; ++t) {
      std::vector<int64_t> s = sampleWithoutReplacement(g, 6, 3, 77, t, p);
      std::set<int64_t> uniq(s.begin(), s.end());
      EXPECT_EQ(uniq, (std::set<int64_t>{0, 2, 4}));
    }
  }
  // Random distributions with some exact zeros: no repeats, no zeros.
  TestRng rng(10);
  for (uint32_t t = 0; t < 2000; ++t) {
    std::vector<double> o = randomLogits(rng, 8, 2.0);
    std::vector<double> g8 = softmax(o.data(), 8);
    g8[t % 8] = 0.0;
    g8[(t + 3) % 8] = 0.0;
    for (SamplingPrecision p :
         {SamplingPrecision::F32, SamplingPrecision::F64}) {
      std::vector<int64_t> s =
          sampleWithoutReplacement(g8.data(), 8, 4, 123, t, p);
      std::set<int64_t> uniq(s.begin(), s.end());
      EXPECT_EQ(uniq.size(), 4u);
      for (int64_t e : s)
        EXPECT_GT(g8[size_t(e)], 0.0);
    }
  }
}

TEST(Sampling, RoundingFallbackPicksLastPositive) {
  // cumsum ends at 0.5 < 1: for u >= 0.5 no i has u < c_i, so the draw is
  // the last i with p_i > 0, i.e. 1 (never 2 or 3, whose p is 0).
  const float g[4] = {0.25f, 0.25f, 0.0f, 0.0f};
  int fallbacks = 0;
  for (uint32_t t = 0; t < 1000; ++t) {
    std::vector<int64_t> s = sampleWithoutReplacementF32(g, 4, 1, 3, t);
    const float u = philoxUniform(3, t, 0);
    const int64_t want = u < 0.25f ? 0 : 1;
    EXPECT_EQ(s[0], want);
    fallbacks += u >= 0.5f;
  }
  EXPECT_GT(fallbacks, 300);
}

TEST(Sampling, DegenerateAllZeroPicksLowestUntaken) {
  // Only one expert has mass and K = 3: the first draw takes it, then nothing
  // is left and the reference takes the lowest indices not yet selected.
  const double g[4] = {0.0, 0.0, 1.0, 0.0};
  for (uint32_t t = 0; t < 20; ++t)
    EXPECT_EQ(sampleWithoutReplacement(g, 4, 3, 1, t, SamplingPrecision::F32),
              (std::vector<int64_t>{2, 0, 1}));
}

TEST(Sampling, DeterministicAndSeedSensitive) {
  TestRng rng(11);
  std::vector<double> o = randomLogits(rng, 16, 1.0);
  std::vector<double> g = softmax(o.data(), 16);
  int diffLow = 0, diffHigh = 0;
  for (uint32_t t = 0; t < 200; ++t) {
    auto a = sampleWithoutReplacement(g.data(), 16, 2, 5, t,
                                      SamplingPrecision::F32);
    auto b = sampleWithoutReplacement(g.data(), 16, 2, 5, t,
                                      SamplingPrecision::F32);
    EXPECT_EQ(a, b);
    diffLow += a != sampleWithoutReplacement(g.data(), 16, 2, 6, t,
                                             SamplingPrecision::F32);
    // The high word of the seed is part of the key.
    diffHigh += a != sampleWithoutReplacement(g.data(), 16, 2,
                                              5 + (uint64_t(1) << 32), t,
                                              SamplingPrecision::F32);
  }
  EXPECT_GT(diffLow, 50);
  EXPECT_GT(diffHigh, 50);
}

TEST(Sampling, F32AndF64AgreeAwayFromBoundaries) {
  TestRng rng(12);
  int agree = 0, total = 0;
  for (uint32_t t = 0; t < 5000; ++t) {
    std::vector<double> o = randomLogits(rng, 16, 1.5);
    std::vector<double> g = softmax(o.data(), 16);
    double m32 = 0, m64 = 0;
    auto a = sampleWithoutReplacement(g.data(), 16, 3, 21, t,
                                      SamplingPrecision::F32, &m32);
    auto b = sampleWithoutReplacement(g.data(), 16, 3, 21, t,
                                      SamplingPrecision::F64, &m64);
    ++total;
    agree += a == b;
    if (m32 > 1e-5) {
      EXPECT_EQ(a, b) << "token " << t;
    }
    // The double-to-f32 entry point is the plain f32 algorithm on float(g).
    std::vector<float> gf(g.begin(), g.end());
    EXPECT_EQ(a, sampleWithoutReplacementF32(gf.data(), 16, 3, 21, t));
  }
  EXPECT_GE(agree, total - 5);
}

// Pearson's chi-square statistic.
double chiSquare(const std::vector<double> &observed,
                 const std::vector<double> &expectedProb, double n) {
  double chi = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = expectedProb[i] * n;
    chi += (observed[i] - e) * (observed[i] - e) / e;
  }
  return chi;
}

TEST(Sampling, PlackettLuceFrequencies) {
  // E = 4, K = 2, g = {0.1, 0.2, 0.3, 0.4}, 20000 tokens, fixed seed. Exact
  // Plackett-Luce probabilities: first draw P(i) = g_i; ordered pair
  // P(i, j) = g_i g_j / (1 - g_i); unordered set P({i, j}) = P(i,j) + P(j,i).
  // Critical values at p = 0.001: df 3 -> 16.27, df 11 -> 31.26,
  // df 5 -> 20.52. The seeds are fixed, so the test is deterministic.
  const double g[4] = {0.1, 0.2, 0.3, 0.4};
  const int n = 20000;
  for (SamplingPrecision p : {SamplingPrecision::F32, SamplingPrecision::F64}) {
    std::vector<double> first(4, 0), ordered(16, 0), sets(16, 0);
    for (int t = 0; t < n; ++t) {
      auto s = sampleWithoutReplacement(g, 4, 2, 0x5eed, uint32_t(t), p);
      first[size_t(s[0])] += 1;
      ordered[size_t(s[0] * 4 + s[1])] += 1;
      const int64_t lo = std::min(s[0], s[1]), hi = std::max(s[0], s[1]);
      sets[size_t(lo * 4 + hi)] += 1;
    }
    std::vector<double> pf(g, g + 4);
    EXPECT_LT(chiSquare(first, pf, n), 16.27);

    std::vector<double> oObs, oExp, sObs, sExp;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        if (i == j) {
          EXPECT_EQ(ordered[size_t(i * 4 + j)], 0.0);
          continue;
        }
        oObs.push_back(ordered[size_t(i * 4 + j)]);
        oExp.push_back(g[i] * g[j] / (1 - g[i]));
        if (i < j) {
          sObs.push_back(sets[size_t(i * 4 + j)]);
          sExp.push_back(g[i] * g[j] / (1 - g[i]) + g[j] * g[i] / (1 - g[j]));
        }
      }
    ASSERT_EQ(oObs.size(), 12u);
    ASSERT_EQ(sObs.size(), 6u);
    EXPECT_NEAR(sumOf(oExp), 1.0, 1e-12);
    EXPECT_NEAR(sumOf(sExp), 1.0, 1e-12);
    EXPECT_LT(chiSquare(oObs, oExp, n), 31.26);
    EXPECT_LT(chiSquare(sObs, sExp, n), 20.52);
  }
}

//===----------------------------------------------------------------------===//
// Auxiliary loss
//===----------------------------------------------------------------------===//

TEST(AuxLoss, TrimmedLassoHandExample) {
  // Rows {0.5, 0.3, 0.2} and {0.1, 0.1, 0.8}, K = 2, lambda = 0.5:
  // 1 - (0.5 + 0.3) = 0.2, 1 - (0.8 + 0.1) = 0.1, mean 0.15, times 0.5
  // = 0.075.
  std::vector<double> g = {0.5, 0.3, 0.2, 0.1, 0.1, 0.8};
  EXPECT_NEAR(trimmedLassoLoss(g, 2, 3, 2, 0.5), 0.075, 1e-15);
  // K = 1: 1 - 0.5 = 0.5, 1 - 0.8 = 0.2 -> mean 0.35 * 1e-3.
  EXPECT_NEAR(trimmedLassoLoss(g, 2, 3, 1, 1e-3), 0.35e-3, 1e-17);
  // K = E: nothing is trimmed.
  EXPECT_NEAR(trimmedLassoLoss(g, 2, 3, 3, 1.0), 0.0, 1e-15);
}

} // namespace
