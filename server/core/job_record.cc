#include "server/core/job_record.h"

#include <sodium.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tutti::server {

using nlohmann::json;

std::string JobRecord::ToJson() const {
  json sets_json = json::array();
  for (const auto& [id, ranks] : sets) sets_json.push_back({{"id", id}, {"ranks", ranks}});
  return json{{"token_sha256", token_sha256},
              {"size", size},
              {"membership_epoch", membership_epoch},
              {"resumable", resumable},
              {"sets", std::move(sets_json)},
              {"next_set_id", next_set_id}}
      .dump();
}

Status JobRecord::FromJson(const std::string& text, JobRecord* record) {
  try {
    const json j = json::parse(text);
    record->token_sha256 = j.at("token_sha256").get<std::string>();
    record->size = j.at("size").get<int32_t>();
    record->membership_epoch = j.at("membership_epoch").get<uint64_t>();
    record->resumable = j.at("resumable").get<bool>();
    record->next_set_id = j.at("next_set_id").get<int32_t>();
    record->sets.clear();
    for (const json& set : j.at("sets"))
      record->sets.emplace_back(set.at("id").get<int32_t>(),
                                set.at("ranks").get<std::vector<int32_t>>());
  } catch (const std::exception& e) {
    return Status(Code::kInternal, fmt::format("a job record in etcd is malformed: {}", e.what()));
  }
  return Status::Ok();
}

std::string TokenHash(const std::string& token) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(token.data()), token.size());
  std::string hex;
  for (unsigned char byte : digest) hex += fmt::format("{:02x}", byte);
  return hex;
}

}  // namespace tutti::server
