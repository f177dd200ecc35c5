#include "api/usage.hpp"

#include "accounts/caller_routes.hpp"
#include "api/errors.hpp"
#include "api/profiles.hpp"
#include "api/services.hpp"
#include "http/query_params.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

constexpr int64_t kDefaultDays = 30;
constexpr int64_t kMaxDays = 366;

nlohmann::json day_json(const DailyTokens& d) {
  return {{"day", d.day},
          {"requests", d.requests},
          {"input_tokens", d.tokens.input_tokens},
          {"output_tokens", d.tokens.output_tokens},
          {"cache_creation_input_tokens", d.tokens.cache_creation_input_tokens},
          {"cache_read_input_tokens", d.tokens.cache_read_input_tokens},
          {"total_tokens", d.tokens.total()}};
}

}  // namespace

void add_usage_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  const std::shared_ptr<TokenLedger>& ledger = s.tokens;
  const uint64_t daily_tokens = s.daily_tokens;
  // Given its caller, resolved off the io thread when that is slow (accounts/caller_routes.hpp).
  router.add_async(
      http::verb::get, "/usage",
      accounts::with_reader(callers, [ledger, daily_tokens, profiles = s.profiles, box = s.box_limits,
                                      idle = s.idle_timeout](const Request& req, const accounts::Caller& caller) {
        int64_t days = query_int(req, "days", 1, kMaxDays).value_or(kDefaultDays);
        nlohmann::json tokens = {{"gateway", ledger != nullptr}};
        if (ledger) {
          DailyTokens today = ledger->on(caller.account.name, utc_today());
          tokens["today"] = day_json(today);
          tokens["daily_budget"] = daily_tokens ? nlohmann::json(daily_tokens) : nlohmann::json(nullptr);
          tokens["remaining_today"] = daily_tokens
                                          ? nlohmann::json(daily_tokens - std::min(daily_tokens, today.tokens.total()))
                                          : nlohmann::json(nullptr);
          tokens["days"] = nlohmann::json::array();
          for (const DailyTokens& d : ledger->recent(caller.account.name, static_cast<size_t>(days)))
            tokens["days"].push_back(day_json(d));
        }
        return Response::json({{"tokens", tokens}, {"box", profile_box_json(profiles.get(), box, idle, req)}});
      }));
}

}  // namespace agentbox::api
