#include "util/account_strands.hpp"

#include <algorithm>

namespace agentbox {

std::shared_ptr<const LoopStrand> AccountStrands::of(const std::string& account) {
  std::lock_guard lock(mu_);
  auto& slot = strands_[account];
  if (auto held = slot.lock()) return held;
  auto strand = std::make_shared<const LoopStrand>(boost::asio::make_strand(io_));
  slot = strand;
  if (strands_.size() >= sweep_at_) {
    forget_unheld();
    sweep_at_ = std::max<size_t>(64, 2 * strands_.size());
  }
  return strand;
}

size_t AccountStrands::held() {
  std::lock_guard lock(mu_);
  forget_unheld();
  return strands_.size();
}

void AccountStrands::forget_unheld() {
  std::erase_if(strands_, [](const auto& entry) { return entry.second.expired(); });
}

}  // namespace agentbox
