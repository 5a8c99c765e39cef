#include "server/security/zap_handler.h"

#include <spdlog/spdlog.h>

#include <iterator>
#include <vector>

#include <zmq_addon.hpp>

namespace tutti::server {

ZapHandler::ZapHandler(zmq::context_t& context, const CurveServerKeys& keys)
    : keys_(keys), socket_(context, zmq::socket_type::rep) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind("inproc://zeromq.zap.01");
}

void ZapHandler::HandleRequests() {
  while (true) {
    // version, request id, domain, address, identity, mechanism, credentials...
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(socket_, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    std::string status = "400", text = "malformed ZAP request", user_id;
    if (parts.size() >= 7 && parts[0].to_string_view() == "1.0" &&
        parts[5].to_string_view() == "CURVE" && parts[6].size() == 32) {
      char z85[41];
      zmq_z85_encode(z85, parts[6].data<uint8_t>(), 32);
      if (keys_.clients.count(z85)) {
        status = "200";
        text = "OK";
        user_id = z85;
      } else {
        text = "public key not on tuttid's client list";
        spdlog::warn("refused a CURVE client from {}: key {} is not on the client list",
                     parts[3].to_string(), z85);
      }
    }
    const std::string request_id = parts.size() > 1 ? parts[1].to_string() : std::string();
    socket_.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(status), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(text), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(user_id), zmq::send_flags::sndmore);
    socket_.send(zmq::str_buffer(""), zmq::send_flags::none);
  }
}

}  // namespace tutti::server
