// The Prometheus registry's text format.
#include <gtest/gtest.h>

#include "kiln/error.h"
#include "serve/metrics.h"

namespace kiln::serve {
namespace {

TEST(serve_Metrics, TextFormat) {
    MetricsRegistry r;
    r.declare_counter("req_total", "Requests.");
    r.declare_histogram("lat_us", "Latency.", {10, 100});
    r.add("req_total", {{"model", "a\"b"}}, 2);
    r.observe("lat_us", {{"model", "m"}}, 5);
    r.observe("lat_us", {{"model", "m"}}, 50);
    r.observe("lat_us", {{"model", "m"}}, 500);
    std::string t = r.text();
    EXPECT_NE(t.find("# TYPE req_total counter\n"), std::string::npos) << t;
    EXPECT_NE(t.find("req_total{model=\"a\\\"b\"} 2\n"), std::string::npos) << t;
    EXPECT_NE(t.find("lat_us_bucket{model=\"m\",le=\"10\"} 1\n"), std::string::npos) << t;
    EXPECT_NE(t.find("lat_us_bucket{model=\"m\",le=\"100\"} 2\n"), std::string::npos) << t;
    EXPECT_NE(t.find("lat_us_bucket{model=\"m\",le=\"+Inf\"} 3\n"), std::string::npos) << t;
    EXPECT_NE(t.find("lat_us_sum{model=\"m\"} 555\n"), std::string::npos) << t;
    EXPECT_NE(t.find("lat_us_count{model=\"m\"} 3\n"), std::string::npos) << t;
    EXPECT_THROW(r.add("undeclared", {}), Error);
}

}  // namespace
}  // namespace kiln::serve
