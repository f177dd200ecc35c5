#pragma once
// Prometheus' text exposition format (0.0.4), written family by family: a # HELP and a # TYPE
// line, then the family's samples. Label values are escaped here; names are the caller's
// constants (agentbox_<thing>_<unit>).
//
// Runs on: whichever thread builds a scrape's page; one Exposition per scrape.
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox::metrics {

struct Label {
  std::string_view name;
  std::string_view value;
};

class Exposition {
 public:
  // type: "counter", "gauge" or "histogram".
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, double value, std::initializer_list<Label> labels = {});
  void sample(std::string_view name, double value, const std::vector<Label>& labels);

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void write_sample(std::string_view name, double value, const Label* labels, size_t count);
  std::string out_;
};

// The content type of the page: what Prometheus asks for and expects.
inline constexpr std::string_view kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace agentbox::metrics
