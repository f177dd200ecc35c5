#include "metrics/events.hpp"

namespace agentbox::metrics {

Events& events() {
  static Events the_events;
  return the_events;
}

void count_start_failure(StartFailure why) { add(events().box_start_failures[static_cast<size_t>(why)]); }

}  // namespace agentbox::metrics
