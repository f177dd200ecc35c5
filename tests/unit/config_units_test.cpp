// Sizes, CPU amounts and counts as people write them in config files and flags.
#include "config/units.hpp"

#include <gtest/gtest.h>

#include "util/error.hpp"

namespace agentbox {
namespace {

// The message of the Error that fn throws ("" if none).
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParseSize, PlainNumbersAreBytes) {
  EXPECT_EQ(parse_size("123"), 123u);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("123B"), 123u);
}

TEST(ParseSize, UnitsArePowersOf1024InEverySpelling) {
  EXPECT_EQ(parse_size("100k"), 100u * 1024);
  EXPECT_EQ(parse_size("100K"), 100u * 1024);
  EXPECT_EQ(parse_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_size("2Gi"), 2ull << 30);
  EXPECT_EQ(parse_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_size("2GB"), 2ull << 30);
  EXPECT_EQ(parse_size("2gb"), 2ull << 30);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_size(" 2 G "), 2ull << 30);
}

TEST(ParseSize, FractionsNeedAUnitAndRoundDown) {
  EXPECT_EQ(parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_size("0.5k"), 512u);
  EXPECT_EQ(parse_size("0.1k"), 102u);  // 102.4 bytes
  EXPECT_NE(error_of([] { parse_size("1.5"); }), "");
}

TEST(ParseSize, LargestValueFitsAndOneMoreOverflows) {
  EXPECT_EQ(parse_size("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(error_of([] { parse_size("18446744073709551616"); }), "invalid size \"18446744073709551616\": too large");
  EXPECT_EQ(error_of([] { parse_size("16777216T"); }), "invalid size \"16777216T\": too large");
  EXPECT_EQ(parse_size("16777215T"), 16777215ull << 40);
}

TEST(ParseSize, BadValuesAreNamedInTheError) {
  EXPECT_EQ(error_of([] { parse_size("12Q"); }), "invalid size \"12Q\": unknown unit \"Q\" (use K, M, G or T)");
  EXPECT_EQ(error_of([] { parse_size("-1G"); }), "invalid size \"-1G\": must not be negative");
  EXPECT_EQ(error_of([] { parse_size(""); }), "invalid size \"\": empty value");
  EXPECT_EQ(error_of([] { parse_size("lots"); }), "invalid size \"lots\": not a number");
  for (const char* bad : {"G", "1.G", ".5G", "1GG", "1Gib2", "0x10", "1e3", "+5", "2 G B"})
    EXPECT_NE(error_of([&] { parse_size(bad); }), "") << bad;
}

TEST(ParseCpu, CoresAndMillicores) {
  EXPECT_EQ(parse_cpu("1.5"), 1500u);
  EXPECT_EQ(parse_cpu("2"), 2000u);
  EXPECT_EQ(parse_cpu("0.25"), 250u);
  EXPECT_EQ(parse_cpu("500m"), 500u);
  EXPECT_EQ(parse_cpu("0.001"), 1u);
}

TEST(ParseCpu, RefusesZeroNegativesAndGarbage) {
  EXPECT_EQ(error_of([] { parse_cpu("0"); }), "invalid cpu \"0\": must be at least 1m (one thousandth of a core)");
  EXPECT_NE(error_of([] { parse_cpu("0m"); }), "");
  EXPECT_NE(error_of([] { parse_cpu("0.0001"); }), "");  // rounds to 0
  EXPECT_EQ(error_of([] { parse_cpu("-1"); }), "invalid cpu \"-1\": must not be negative");
  EXPECT_NE(error_of([] { parse_cpu("1.5m"); }), "");
  EXPECT_NE(error_of([] { parse_cpu("two"); }), "");
  EXPECT_NE(error_of([] { parse_cpu("2 cores"); }), "");
  EXPECT_NE(error_of([] { parse_cpu("5000000"); }), "");  // more millicores than uint32 holds
}

TEST(ParseCount, WholeNonNegativeNumbersOnly) {
  EXPECT_EQ(parse_count("512"), 512u);
  EXPECT_EQ(parse_count("0"), 0u);
  EXPECT_EQ(error_of([] { parse_count("-3"); }), "invalid count \"-3\": must not be negative");
  EXPECT_NE(error_of([] { parse_count("1.5"); }), "");
  EXPECT_NE(error_of([] { parse_count("12k"); }), "");
  EXPECT_NE(error_of([] { parse_count(""); }), "");
  EXPECT_NE(error_of([] { parse_count("99999999999999999999"); }), "");
}

TEST(FormatSize, ShortFormsThatParseBack) {
  EXPECT_EQ(format_size(123), "123B");
  EXPECT_EQ(format_size(512ull << 20), "512M");
  EXPECT_EQ(format_size(3ull << 29), "1.5G");
  EXPECT_EQ(format_size(2ull << 40), "2T");
  EXPECT_EQ(format_size(1024), "1K");
  for (const char* text : {"512M", "1.5G", "2T", "100K", "7B"}) EXPECT_EQ(format_size(parse_size(text)), text);
}

}  // namespace
}  // namespace agentbox
