#include "server/security/http_auth.h"

#include <sodium.h>

#include <vector>

#include "server/security/constant_time.h"

namespace tutti::server {
namespace {

std::string Base64(const std::string& bytes) {
  std::vector<char> out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL));
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  return std::string(out.data());
}

}  // namespace

HttpAuth::HttpAuth(HttpCredentials credentials) : required_(credentials.any()) {
  if (!credentials.token.empty()) bearer_ = "Bearer " + credentials.token;
  if (!credentials.user.empty()) basic_ = "Basic " + Base64(credentials.user + ":" + credentials.password);
}

bool HttpAuth::Allows(const std::string& authorization) const {
  if (!required_) return true;
  // Both compared, whichever matches, so that the time does not tell which kind was configured.
  const bool bearer = !bearer_.empty() && SameSecret(authorization, bearer_);
  const bool basic = !basic_.empty() && SameSecret(authorization, basic_);
  return bearer || basic;
}

}  // namespace tutti::server
