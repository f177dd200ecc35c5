// The /metrics page's pieces: the text format (escaping, values), histograms (cumulative
// buckets that agree with _count) and the request counters (route patterns, never paths: many
// users' requests add no series).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "config/server_config.hpp"
#include "metrics/exposition.hpp"
#include "metrics/histogram.hpp"
#include "metrics/http_requests.hpp"
#include "metrics/process_stats.hpp"
#include "support/scratch_dir.hpp"
#include "util/error.hpp"

namespace agentbox::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

size_t samples(const std::string& page, const std::string& name) {
  size_t n = 0, at = 0;
  while ((at = page.find("\n" + name + "{", at)) != std::string::npos) {
    ++n;
    ++at;
  }
  return n;
}

TEST(ExpositionTest, WritesHelpTypeAndEscapedLabels) {
  Exposition out;
  out.family("agentbox_x_total", "counter", "Things.");
  out.sample("agentbox_x_total", 3, {{"route", "/a\"b\\c\nd"}});
  out.sample("agentbox_x_total", 1e6);
  out.sample("agentbox_x_total", std::nan(""));
  out.sample("agentbox_x_total", INFINITY);
  EXPECT_EQ(out.text(),
            "# HELP agentbox_x_total Things.\n# TYPE agentbox_x_total counter\n"
            "agentbox_x_total{route=\"/a\\\"b\\\\c\\nd\"} 3\n"
            "agentbox_x_total 1000000\nagentbox_x_total NaN\nagentbox_x_total +Inf\n");
}

TEST(HistogramTest, BucketsAreCumulativeAndCountIsTheInfBucket) {
  static constexpr double kBounds[] = {0.1, 1};
  Histogram h(kBounds);
  h.observe(0.05);
  h.observe(0.1);  // on a bound: in that bucket (le)
  h.observe(0.5);
  h.observe(7);
  Exposition out;
  h.write(out, "x_seconds", {{"route", "/r"}});
  EXPECT_EQ(out.text(),
            "x_seconds_bucket{route=\"/r\",le=\"0.1\"} 2\n"
            "x_seconds_bucket{route=\"/r\",le=\"1\"} 3\n"
            "x_seconds_bucket{route=\"/r\",le=\"+Inf\"} 4\n"
            "x_seconds_sum{route=\"/r\"} 7.65\n"
            "x_seconds_count{route=\"/r\"} 4\n");
  EXPECT_EQ(h.count(), 4u);
}

TEST(HttpRequestMetricsTest, CountsByRoutePatternMethodAndStatus) {
  HttpRequestMetrics m;
  m.name_routes({{"GET", "/files/list"}, {"POST", "/execute"}});
  m.observe(0, "GET", 200, 0.002);
  m.observe(0, "GET", 200, 0.003);
  m.observe(0, "GET", 404, 0.001);
  m.observe(1, "POST", 507, 0.01);
  Exposition out;
  m.write(out);
  const std::string page = out.text();
  EXPECT_THAT(page, HasSubstr("agentbox_http_requests_total{route=\"/files/list\",method=\"GET\",status=\"200\"} 2\n"));
  EXPECT_THAT(page, HasSubstr("agentbox_http_requests_total{route=\"/files/list\",method=\"GET\",status=\"404\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("agentbox_http_requests_total{route=\"/execute\",method=\"POST\",status=\"507\"} 1\n"));
  EXPECT_THAT(page,
              HasSubstr("agentbox_http_request_duration_seconds_count{route=\"/files/list\",method=\"GET\"} 3\n"));
  EXPECT_THAT(page, HasSubstr("agentbox_storage_refusals_total 1\n"));
  EXPECT_EQ(m.storage_refusals(), 1u);
}

TEST(HttpRequestMetricsTest, UnmatchedRequestsShareOneRouteAndAClientsMethodIsNotALabel) {
  HttpRequestMetrics m;
  m.name_routes({{"GET", "/health"}});
  for (int i = 0; i < 1000; ++i) {
    m.observe(HttpRequestMetrics::kUnmatched, "GET", 404, 0.0001);                     // 1000 different paths
    m.observe(HttpRequestMetrics::kUnmatched, "X-USER-" + std::to_string(i), 405, 0);  // invented methods
  }
  Exposition out;
  m.write(out);
  const std::string page = out.text();
  EXPECT_THAT(page, HasSubstr("{route=\"unmatched\",method=\"GET\",status=\"404\"} 1000\n"));
  EXPECT_THAT(page, HasSubstr("{route=\"unmatched\",method=\"other\",status=\"405\"} 1000\n"));
  EXPECT_THAT(page, Not(HasSubstr("X-USER")));
  EXPECT_EQ(samples(page, "agentbox_http_requests_total"), 2u);
}

TEST(HttpRequestMetricsTest, ManyStatusesOnOneRouteStayBounded) {
  HttpRequestMetrics m;
  m.name_routes({{"GET", "/r"}});
  for (unsigned code = 200; code < 240; ++code) m.observe(0, "GET", code, 0);
  Exposition out;
  m.write(out);
  // 16 statuses each get their own series, the rest are counted together.
  EXPECT_EQ(samples(out.text(), "agentbox_http_requests_total"), 17u);
  EXPECT_THAT(out.text(), HasSubstr("status=\"other\"} 24\n"));
}

TEST(HttpRequestMetricsTest, WithoutRoutesNothingIsCounted) {
  HttpRequestMetrics m;
  m.observe(0, "GET", 200, 0.1);  // a server whose daemon named no routes: no crash, no series
  Exposition out;
  m.write(out);
  EXPECT_EQ(samples(out.text(), "agentbox_http_requests_total"), 0u);
}

TEST(ProcessStatsTest, WritesTheStandardFamilies) {
  Exposition out;
  write_process_stats(out);
  for (const char* name : {"process_cpu_seconds_total ", "process_resident_memory_bytes ", "process_open_fds ",
                           "process_max_fds ", "process_threads ", "process_start_time_seconds "})
    EXPECT_THAT(out.text(), HasSubstr(std::string("\n") + name)) << name;
  EXPECT_THAT(out.text(), Not(HasSubstr("process_threads 0\n")));
}

class MetricsConfigTest : public ::testing::Test {
 protected:
  ServerConfig load(const std::string& toml) {
    std::string path = scratch_.path() + "/config.toml";
    std::ofstream(path) << toml;
    return load_server_config(path, [](const char*) -> const char* { return nullptr; });
  }
  testing::ScratchDir scratch_{"agentbox-metrics-config"};
};

TEST_F(MetricsConfigTest, ListenIsOffByDefaultAndReadFromTheFile) {
  EXPECT_EQ(load("").metrics.listen, "");
  EXPECT_EQ(load("[metrics]\nlisten = \"127.0.0.1:9464\"\n").metrics.listen, "127.0.0.1:9464");
}

TEST_F(MetricsConfigTest, ABadAddressIsRefusedNamingIt) {
  try {
    load("[metrics]\nlisten = \"nowhere\"\n");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("nowhere"));
  }
  EXPECT_THROW(load("[metrics]\nport = 9464\n"), Error);  // not one of its keys
}

}  // namespace
}  // namespace agentbox::metrics
