// The scheduler's modes as a table of strategies, chosen on numbers alone.
#include "scheduler/mode_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tinyai {
namespace {

// A model of 100 bytes of weights in slices of at most 10, an arena of 40
// for a whole pass and 4 for one row, and 20 of KV cache and tables:
// NORMAL needs 160, MEMORY_OPT 70, STREAMING 34.
ModeNeeds Model(uint64_t limit, uint64_t cap = 0) {
  ModeNeeds n;
  n.limit = limit;
  n.cache_cap = cap;
  n.all_weights = 100;
  n.largest_slice = 10;
  n.arena_full = 40;
  n.arena_one = 4;
  n.rest = 20;
  return n;
}

int32_t Of(TinyAIExecutionMode m) { return StrategyOf(m); }

TEST(ModeTable, IsOrderedFromTheMostResident) {
  ASSERT_EQ(kModeStrategies, 3);
  EXPECT_EQ(Strategy(0).mode, TINYAI_EXEC_NORMAL);
  EXPECT_EQ(Strategy(1).mode, TINYAI_EXEC_MEMORY_OPT);
  EXPECT_EQ(Strategy(2).mode, TINYAI_EXEC_STREAMING);
  EXPECT_TRUE(Strategy(0).all_weights);
  EXPECT_FALSE(Strategy(1).all_weights);
  EXPECT_FALSE(Strategy(1).fewer_rows);
  EXPECT_TRUE(Strategy(2).fewer_rows);
  EXPECT_EQ(StrategyOf(TINYAI_EXEC_ADAPTIVE), -1);
  const ModeNeeds n = Model(0);
  EXPECT_EQ(StrategyNeeds(Strategy(0), n), 160u);
  EXPECT_EQ(StrategyNeeds(Strategy(1), n), 70u);
  EXPECT_EQ(StrategyNeeds(Strategy(2), n), 34u);
}

TEST(ModeTable, AdaptiveTakesTheFirstThatFitsAtEachBoundary) {
  struct Case {
    uint64_t limit;
    TinyAIExecutionMode mode;
  } cases[] = {{0, TINYAI_EXEC_NORMAL},     {160, TINYAI_EXEC_NORMAL},    {159, TINYAI_EXEC_MEMORY_OPT},
               {70, TINYAI_EXEC_MEMORY_OPT}, {69, TINYAI_EXEC_STREAMING}, {34, TINYAI_EXEC_STREAMING}};
  for (const Case& c : cases) {
    const ModeChoice ch = ChooseStrategy(Model(c.limit), TINYAI_EXEC_ADAPTIVE);
    ASSERT_GE(ch.chosen, 0) << c.limit;
    EXPECT_EQ(Strategy(ch.chosen).mode, c.mode) << "limit " << c.limit;
  }
  const ModeChoice none = ChooseStrategy(Model(33), TINYAI_EXEC_ADAPTIVE);
  EXPECT_EQ(none.chosen, -1);
  EXPECT_EQ(none.refused, Of(TINYAI_EXEC_NORMAL));
  EXPECT_FALSE(none.cache_cap);
}

TEST(ModeTable, ARequestedModeIsTheOnlyOneTried) {
  ModeChoice c = ChooseStrategy(Model(159), TINYAI_EXEC_NORMAL);
  EXPECT_EQ(c.chosen, -1);
  EXPECT_EQ(c.refused, Of(TINYAI_EXEC_NORMAL));
  c = ChooseStrategy(Model(69), TINYAI_EXEC_MEMORY_OPT);
  EXPECT_EQ(c.chosen, -1);
  EXPECT_EQ(c.refused, Of(TINYAI_EXEC_MEMORY_OPT));
  // STREAMING is taken though NORMAL would fit: it was asked for.
  c = ChooseStrategy(Model(0), TINYAI_EXEC_STREAMING);
  EXPECT_EQ(c.chosen, Of(TINYAI_EXEC_STREAMING));
  EXPECT_EQ(c.refused, -1);
}

TEST(ModeTable, TheCachesCapRulesOutWhatHoldsMoreWeights) {
  // No limit, a cap of 50: the weights (100) do not fit it, a slice does.
  ModeChoice c = ChooseStrategy(Model(0, 50), TINYAI_EXEC_ADAPTIVE);
  EXPECT_EQ(c.chosen, Of(TINYAI_EXEC_MEMORY_OPT));
  EXPECT_EQ(c.refused, Of(TINYAI_EXEC_NORMAL));
  EXPECT_TRUE(c.cache_cap);
  c = ChooseStrategy(Model(1000, 50), TINYAI_EXEC_NORMAL);
  EXPECT_EQ(c.chosen, -1);
  EXPECT_TRUE(c.cache_cap);  // the limit would hold them
  c = ChooseStrategy(Model(100, 50), TINYAI_EXEC_NORMAL);
  EXPECT_TRUE(c.cache_cap);  // both refuse: the cap is named (raising the limit alone would not do)
  c = ChooseStrategy(Model(100, 0), TINYAI_EXEC_NORMAL);
  EXPECT_FALSE(c.cache_cap);  // the limit alone refuses
  // A cap below a slice: nothing.
  c = ChooseStrategy(Model(0, 9), TINYAI_EXEC_ADAPTIVE);
  EXPECT_EQ(c.chosen, -1);
}

TEST(ModeTable, SumsSaturateInsteadOfWrapping) {
  ModeNeeds n = Model(1000);
  n.all_weights = UINT64_MAX - 10;
  EXPECT_EQ(StrategyNeeds(Strategy(0), n), UINT64_MAX);
  EXPECT_EQ(Strategy(ChooseStrategy(n, TINYAI_EXEC_ADAPTIVE).chosen).mode, TINYAI_EXEC_MEMORY_OPT);
}

TEST(ModeTable, StreamingTakesTheMostRowsThatFit) {
  // An arena of 4 bytes a row: with a slice of 10 and 20 of the rest,
  // a limit of L fits (L - 30) / 4 rows.
  std::vector<int32_t> asked;
  auto arena = [&](int32_t rows, uint64_t* a) {
    asked.push_back(rows);
    *a = 4u * static_cast<uint64_t>(rows);
    return true;
  };
  EXPECT_EQ(MostRowsThatFit(Model(34), 32, arena), 1);
  EXPECT_EQ(MostRowsThatFit(Model(57), 32, arena), 6);
  EXPECT_EQ(MostRowsThatFit(Model(58), 32, arena), 7);
  EXPECT_EQ(MostRowsThatFit(Model(0), 32, arena), 32);
  EXPECT_EQ(MostRowsThatFit(Model(33), 32, arena), 0);  // not even one row
  asked.clear();
  MostRowsThatFit(Model(1000), 32, arena);
  EXPECT_LE(asked.size(), 7u);  // a binary search, not a walk
  // A plan that fails stops the search.
  auto fails = [](int32_t rows, uint64_t* a) {
    *a = 4u * static_cast<uint64_t>(rows);
    return rows < 16;
  };
  EXPECT_EQ(MostRowsThatFit(Model(1000), 32, fails), 0);
}

}  // namespace
}  // namespace tinyai
