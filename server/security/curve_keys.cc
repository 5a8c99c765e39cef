#include "server/security/curve_keys.h"

#include <fmt/format.h>
#include <toml++/toml.h>
#include <zmq.h>

namespace tutti::server {
namespace {

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

Status ParseFile(const std::string& path, toml::table* table) {
  try {
    *table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return Invalid(fmt::format("{}:{}:{}: {}", path, where.line, where.column, e.description()));
  }
  return Status::Ok();
}

}  // namespace

bool IsZ85Key(const std::string& key) {
  uint8_t bytes[32];
  return key.size() == 40 && zmq_z85_decode(bytes, key.c_str()) != nullptr;
}

Status LoadCurveServerKeys(const std::string& secret_file, const std::string& clients_file,
                           CurveServerKeys* keys) {
  toml::table secret;
  TUTTI_RETURN_IF_ERROR(ParseFile(secret_file, &secret));
  for (const auto& [key, value] : secret)
    if (key.str() != "secret_key" && key.str() != "public_key")
      return Invalid(fmt::format("{}: unknown key '{}' (expected secret_key)", secret_file, key.str()));
  const auto secret_key = secret["secret_key"].value<std::string>();
  if (!secret_key || !IsZ85Key(*secret_key))
    return Invalid(fmt::format("{}: secret_key must be a 40-character Z85 CURVE key "
                               "(make one with tuttid --generate-curve-keypair)",
                               secret_file));
  char public_key[41];
  if (zmq_curve_public(public_key, secret_key->c_str()) != 0)
    return Invalid(fmt::format("{}: cannot derive the public key from secret_key", secret_file));
  keys->secret_key = *secret_key;
  keys->public_key = public_key;

  toml::table clients;
  TUTTI_RETURN_IF_ERROR(ParseFile(clients_file, &clients));
  for (const auto& [key, value] : clients)
    if (key.str() != "jobs")
      return Invalid(fmt::format("{}: unknown key '{}' (expected [jobs.<job>] tables)",
                                 clients_file, key.str()));
  const toml::table* jobs = clients["jobs"].as_table();
  if (!jobs || jobs->empty())
    return Invalid(fmt::format("{}: no [jobs.<job>] table: no rank could ever register",
                               clients_file));
  keys->clients.clear();
  for (const auto& [job, entry] : *jobs) {
    const std::string where = fmt::format("{}: jobs.{}", clients_file, job.str());
    const toml::table* table = entry.as_table();
    if (!table) return Invalid(where + " must be a table with ranks = [...]");
    for (const auto& [key, value] : *table)
      if (key.str() != "ranks")
        return Invalid(fmt::format("{}: unknown key '{}' (expected ranks)", where, key.str()));
    const toml::array* ranks = (*table)["ranks"].as_array();
    if (!ranks || ranks->empty())
      return Invalid(where + ".ranks must list the public key of each rank, rank 0 first");
    for (size_t r = 0; r < ranks->size(); ++r) {
      const auto key = (*ranks)[r].value<std::string>();
      if (!key || !IsZ85Key(*key))
        return Invalid(fmt::format("{}.ranks[{}] is not a 40-character Z85 CURVE public key",
                                   where, r));
      keys->clients[*key].push_back(JobRank{std::string(job.str()), static_cast<int32_t>(r)});
    }
  }
  return Status::Ok();
}

std::string GenerateCurveKeyPairToml() {
  char public_key[41], secret_key[41];
  if (zmq_curve_keypair(public_key, secret_key) != 0)
    return "# this libzmq was built without CURVE support\n";
  return fmt::format(
      "# tutti CURVE key pair. tuttid reads secret_key from its --curve-secret-key-file; a rank\n"
      "# takes them as TUTTI_CURVE_PUBLIC_KEY / TUTTI_CURVE_SECRET_KEY, and lists public_key in\n"
      "# tuttid's --curve-clients file.\n"
      "public_key = \"{}\"\nsecret_key = \"{}\"\n",
      public_key, secret_key);
}

}  // namespace tutti::server
