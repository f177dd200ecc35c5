#include "http/openwebui_jwt.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>

#include <optional>

#include "util/error.hpp"

namespace agentbox::http {

namespace {

// Far above Open WebUI's few hundred bytes; bounds the work an attacker's token can cause.
constexpr std::size_t kMaxTokenBytes = 8 * 1024;

int base64url_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

// RFC 7515 base64url without padding; nullopt on any other character.
std::optional<std::string> base64url_decode(std::string_view in) {
  std::string out;
  out.reserve(in.size() * 3 / 4);
  std::uint32_t bits = 0;
  int held = 0;
  for (char c : in) {
    const int v = base64url_value(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    held += 6;
    if (held >= 8) {
      held -= 8;
      out.push_back(static_cast<char>((bits >> held) & 0xff));
    }
  }
  if (held >= 6) return std::nullopt;  // a lone character: no byte
  return out;
}

std::string base64url_encode(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t bits = 0;
  int held = 0;
  for (unsigned char c : in) {
    bits = (bits << 8) | c;
    held += 8;
    while (held >= 6) {
      held -= 6;
      out.push_back(kAlphabet[(bits >> held) & 0x3f]);
    }
  }
  if (held > 0) out.push_back(kAlphabet[(bits << (6 - held)) & 0x3f]);
  return out;
}

std::optional<nlohmann::json> json_object_of(std::string_view part) {
  auto text = base64url_decode(part);
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  return j;
}

}  // namespace

OpenWebuiJwt::OpenWebuiJwt(std::string_view secret) : secret_(secret) {}

std::array<unsigned char, 32> OpenWebuiJwt::mac(std::string_view signing_input) const {
  std::array<unsigned char, 32> out{};
  unsigned int n = 0;
  if (!::HMAC(::EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
              reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(), out.data(), &n) ||
      n != out.size())
    throw Error("HMAC-SHA256 failed");
  return out;
}

std::variant<std::string, OpenWebuiJwt::Refused> OpenWebuiJwt::verify(std::string_view token, std::int64_t now) const {
  if (token.size() > kMaxTokenBytes) return Refused{"the token is too long"};
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos)
    return Refused{"not a signed JWT (three parts)"};
  auto header = json_object_of(token.substr(0, dot1));
  if (!header) return Refused{"the token's header is not JSON"};
  // The algorithm is ours to choose: a token saying "none" (or anything else) is refused
  // before its signature is looked at.
  if (header->value("alg", nlohmann::json()) != "HS256") return Refused{"the token is not signed with HS256"};
  auto signature = base64url_decode(token.substr(dot2 + 1));
  const auto expected = mac(token.substr(0, dot2));
  if (!signature || signature->size() != expected.size() ||
      CRYPTO_memcmp(signature->data(), expected.data(), expected.size()) != 0)
    return Refused{"the token's signature is not valid"};
  auto claims = json_object_of(token.substr(dot1 + 1, dot2 - dot1 - 1));
  if (!claims) return Refused{"the token's claims are not JSON"};
  if (claims->value("iss", nlohmann::json()) != kIssuer) return Refused{"the token's issuer is not open-webui"};
  const auto exp = claims->find("exp");
  if (exp == claims->end() || !exp->is_number()) return Refused{"the token has no expiry"};
  if (exp->get<double>() <= static_cast<double>(now)) return Refused{"the token has expired"};
  const auto sub = claims->find("sub");
  if (sub == claims->end() || !sub->is_string() || sub->get<std::string>().empty())
    return Refused{"the token names no user (sub)"};
  return sub->get<std::string>();
}

std::string OpenWebuiJwt::sign(std::string_view payload_json) const {
  std::string input = base64url_encode(R"({"alg":"HS256","typ":"JWT"})") + "." + base64url_encode(payload_json);
  const auto m = mac(input);
  return input + "." + base64url_encode(std::string_view(reinterpret_cast<const char*>(m.data()), m.size()));
}

}  // namespace agentbox::http
