// The v3 JSON gateway's encoding: every request is a POST of a JSON object to /v3/<service>/<call>;
// bytes (keys, values) travel base64-encoded, 64-bit numbers as decimal strings, and fields at
// their default value (0, false, empty) are left out of answers.
#include "server/ha/etcd_client.h"

#include <sodium.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace tutti::server::ha {
namespace {

using nlohmann::json;

std::string Base64(const std::string& bytes) {
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

bool Unbase64(const std::string& text, std::string* bytes) {
  bytes->assign(text.size(), '\0');
  size_t length = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(bytes->data()), bytes->size(),
                        text.data(), text.size(), nullptr, &length, nullptr,
                        sodium_base64_VARIANT_ORIGINAL) != 0)
    return false;
  bytes->resize(length);
  return true;
}

// A 64-bit field: a decimal string in answers, absent when 0.
int64_t Number(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end()) return 0;
  return it->is_string() ? std::stoll(it->get<std::string>()) : it->get<int64_t>();
}

Status Malformed(const std::string& endpoint, const char* path, const std::string& why) {
  return Status(Code::kInternal,
                "etcd at " + endpoint + " answered " + path + " with something unexpected: " + why);
}

Status ParseKeyValue(const json& kv, KeyValue* out) {
  if (!Unbase64(kv.value("key", ""), &out->key) || !Unbase64(kv.value("value", ""), &out->value))
    return Status(Code::kInternal, "a key or value that is not base64");
  out->create_revision = Number(kv, "create_revision");
  out->mod_revision = Number(kv, "mod_revision");
  out->lease = Number(kv, "lease");
  return Status::Ok();
}

}  // namespace

EtcdClient::EtcdClient(const std::string& endpoint, std::chrono::milliseconds timeout)
    : endpoint_(endpoint), timeout_(timeout), http_(std::make_unique<httplib::Client>(endpoint)) {
  http_->set_connection_timeout(timeout_);
  http_->set_read_timeout(timeout_);
  http_->set_write_timeout(timeout_);
}

EtcdClient::~EtcdClient() = default;

Status EtcdClient::Call(const char* path, const std::string& body, std::string* answer) {
  // The gateway ends an error's chunked body with a gRPC trailer that httplib cannot read (the
  // call then fails with Error::Read): the status and body are collected as they arrive, so an
  // error still says what etcd said.
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = body;
  request.headers.emplace("Content-Type", "application/json");
  int status = 0;
  std::string received;
  request.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    received.append(data, length);
    return true;
  };
  auto result = http_->send(request);
  if (!result && (status == 0 || received.empty()))
    return Status(Code::kTimeout, "etcd at " + endpoint_ + " did not answer " + path + " within " +
                                      std::to_string(timeout_.count()) + " ms (" +
                                      httplib::to_string(result.error()) + ")");
  if (status != 200) {
    std::string message = received;
    try {
      message = json::parse(received).value("message", received);
    } catch (const json::exception&) {
    }
    return Status(Code::kInternal, "etcd at " + endpoint_ + " refused " + path + " (HTTP " +
                                       std::to_string(status) + "): " + message);
  }
  *answer = std::move(received);
  return Status::Ok();
}

Status EtcdClient::Grant(int64_t ttl_s, int64_t* lease) {
  std::string answer;
  TUTTI_RETURN_IF_ERROR(Call("/v3/lease/grant", json{{"TTL", ttl_s}}.dump(), &answer));
  try {
    *lease = Number(json::parse(answer), "ID");
  } catch (const std::exception& e) {
    return Malformed(endpoint_, "/v3/lease/grant", e.what());
  }
  if (*lease == 0) return Malformed(endpoint_, "/v3/lease/grant", "no lease id");
  return Status::Ok();
}

Status EtcdClient::KeepAlive(int64_t lease, int64_t* ttl_s) {
  // A streaming call in gRPC: the gateway answers one renewal per request line.
  std::string answer;
  TUTTI_RETURN_IF_ERROR(
      Call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump(), &answer));
  try {
    // One JSON object per line ({"result": {...}}); the first is this renewal's.
    const json line = json::parse(answer.substr(0, answer.find('\n')));
    if (line.contains("error"))
      return Status(Code::kInternal, "etcd at " + endpoint_ + " refused the lease's renewal: " +
                                         line["error"].value("message", line["error"].dump()));
    *ttl_s = Number(line.value("result", json::object()), "TTL");
  } catch (const std::exception& e) {
    return Malformed(endpoint_, "/v3/lease/keepalive", e.what());
  }
  return Status::Ok();
}

Status EtcdClient::Revoke(int64_t lease) {
  std::string answer;
  return Call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump(), &answer);
}

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  json body{{"key", Base64(key)}, {"value", Base64(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  std::string answer;
  return Call("/v3/kv/put", body.dump(), &answer);
}

Status EtcdClient::Get(const std::string& key, std::optional<KeyValue>* found) {
  std::string answer;
  TUTTI_RETURN_IF_ERROR(Call("/v3/kv/range", json{{"key", Base64(key)}}.dump(), &answer));
  found->reset();
  try {
    const json range = json::parse(answer);
    auto kvs = range.find("kvs");
    if (kvs == range.end() || kvs->empty()) return Status::Ok();
    KeyValue kv;
    TUTTI_RETURN_IF_ERROR(ParseKeyValue(kvs->at(0), &kv));
    *found = std::move(kv);
  } catch (const std::exception& e) {
    return Malformed(endpoint_, "/v3/kv/range", e.what());
  }
  return Status::Ok();
}

Status EtcdClient::GetPrefix(const std::string& prefix, std::vector<KeyValue>* found) {
  // etcd's prefix range: [prefix, prefix with its last byte incremented).
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) end = std::string(1, '\0');
  else end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  std::string answer;
  TUTTI_RETURN_IF_ERROR(Call("/v3/kv/range",
                             json{{"key", Base64(prefix)}, {"range_end", Base64(end)}}.dump(),
                             &answer));
  found->clear();
  try {
    const json range = json::parse(answer);
    auto kvs = range.find("kvs");
    if (kvs == range.end()) return Status::Ok();
    for (const json& item : *kvs) {
      KeyValue kv;
      TUTTI_RETURN_IF_ERROR(ParseKeyValue(item, &kv));
      found->push_back(std::move(kv));
    }
  } catch (const std::exception& e) {
    return Malformed(endpoint_, "/v3/kv/range", e.what());
  }
  return Status::Ok();
}

Status EtcdClient::Delete(const std::string& key) {
  std::string answer;
  return Call("/v3/kv/deleterange", json{{"key", Base64(key)}}.dump(), &answer);
}

Status EtcdClient::CreateIfAbsent(const std::string& key, const std::string& value, int64_t lease,
                                  bool* created, KeyValue* current) {
  const std::string encoded = Base64(key);
  json put{{"key", encoded}, {"value", Base64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  // If the key was never created (create_revision 0), put it; else read it. One transaction, so
  // two candidates cannot both win.
  const json txn{
      {"compare", json::array({{{"key", encoded},
                                {"result", "EQUAL"},
                                {"target", "CREATE"},
                                {"create_revision", "0"}}})},
      {"success", json::array({{{"requestPut", put}}, {{"requestRange", {{"key", encoded}}}}})},
      {"failure", json::array({{{"requestRange", {{"key", encoded}}}}})}};
  std::string answer;
  TUTTI_RETURN_IF_ERROR(Call("/v3/kv/txn", txn.dump(), &answer));
  try {
    const json result = json::parse(answer);
    *created = result.value("succeeded", false);
    const json& responses = result.at("responses");
    const json& range = responses.at(responses.size() - 1).at("response_range");
    auto kvs = range.find("kvs");
    if (kvs == range.end() || kvs->empty())
      return Malformed(endpoint_, "/v3/kv/txn", "the key vanished within the transaction");
    TUTTI_RETURN_IF_ERROR(ParseKeyValue(kvs->at(0), current));
  } catch (const std::exception& e) {
    return Malformed(endpoint_, "/v3/kv/txn", e.what());
  }
  return Status::Ok();
}

}  // namespace tutti::server::ha
