// The keys a rank presents to a tuttid that requires CURVE on the control plane.
#pragma once

#include <string>

namespace tutti::client {

// CURVE keys (Z85, 40 characters each) for a tuttid that requires authentication
// (docs/security.md); all empty: no CURVE.
struct CurveClientKeys {
  std::string server_public;  // TUTTI_CURVE_SERVER_KEY: tuttid's public key
  std::string public_key;     // TUTTI_CURVE_PUBLIC_KEY: this rank's
  std::string secret_key;     // TUTTI_CURVE_SECRET_KEY: this rank's
  bool enabled() const { return !server_public.empty(); }
};

}  // namespace tutti::client
