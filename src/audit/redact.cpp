#include "audit/redact.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

namespace agentbox::audit {

namespace {

// Lower-case fragments of a secret's name: "X-Api-Key", "client_secret", "access_token",
// "Authorization", "Set-Cookie", "openwebui_jwt_secret", "passwd" all contain one.
constexpr std::array<std::string_view, 9> kSecretWords = {"key",    "secret",     "token", "passw",    "auth",
                                                          "cookie", "credential", "jwt",   "signature"};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

void redact_json(nlohmann::json& value) {
  if (value.is_object()) {
    for (auto& [k, v] : value.items()) {
      if (is_secret_name(k))
        v = kRedacted;
      else
        redact_json(v);
    }
  } else if (value.is_array()) {
    for (auto& v : value) redact_json(v);
  }
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// Text that is not JSON (or a JSON body cut short): after each secret-looking name followed by
// ':' or '=' (quotes and spaces around allowed), its value up to the next delimiter is replaced.
std::string redact_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (!is_name_char(text[i])) {
      out += text[i++];
      continue;
    }
    size_t end = i;
    while (end < text.size() && is_name_char(text[end])) ++end;
    const std::string_view name = text.substr(i, end - i);
    out.append(name);
    i = end;
    if (!is_secret_name(name)) continue;
    size_t j = i;
    while (j < text.size() && (text[j] == '"' || text[j] == '\'' || text[j] == ' ')) ++j;
    if (j >= text.size() || (text[j] != ':' && text[j] != '=')) continue;
    ++j;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
    size_t v = j;
    if (v < text.size() && (text[v] == '"' || text[v] == '\'')) {  // a quoted value, escapes skipped
      const char q = text[v++];
      while (v < text.size() && text[v] != q) v += text[v] == '\\' ? 2 : 1;
      v = std::min(v + 1, text.size());
    } else {  // to the next delimiter; "Bearer xyz" keeps going past one space
      while (v < text.size() && !std::strchr("&,;\r\n}]\"'", text[v])) ++v;
    }
    out.append(text.substr(i, j - i));
    out.append(kRedacted);
    i = v;
  }
  return out;
}

// Cut at limit bytes, not inside a UTF-8 sequence.
std::string cut(std::string s, size_t limit) {
  if (s.size() <= limit) return s;
  size_t n = limit;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s;
}

}  // namespace

bool is_secret_name(std::string_view name) {
  const std::string l = lower(name);
  for (std::string_view w : kSecretWords)
    if (l.find(w) != std::string::npos) return true;
  return false;
}

std::string redact_body(std::string_view body) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  if (!parsed.is_discarded() && (parsed.is_object() || parsed.is_array())) {
    redact_json(parsed);
    return cut(parsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kBodyLimit);
  }
  return cut(redact_text(body), kBodyLimit);
}

nlohmann::json redact_headers(const boost::beast::http::fields& headers) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& field : headers) {
    const std::string name = lower(field.name_string());
    const auto raw = field.value();
    std::string value = is_secret_name(name) ? std::string(kRedacted) : cut(std::string(raw.data(), raw.size()), 512);
    if (out.contains(name))
      out[name] = out[name].get<std::string>() + ", " + value;
    else
      out[name] = std::move(value);
  }
  return out;
}

}  // namespace agentbox::audit
