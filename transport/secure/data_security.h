// What a job's TCP data plane protects (docs/security.md, "The data plane"), one setting per job
// (TUTTI_DATA_SECURITY; tuttid refuses ranks that differ with MISMATCH):
//   off        the bytes travel as they are; the handshake still proves both ends are the job's.
//   integrity  every record carries an authentication tag over its bytes and its sequence number:
//              altered, replayed, reordered or dropped records fail the collective.
//   encrypt    the same, and the bytes are encrypted (an AEAD cipher): nobody on the path reads them.
// Shared memory within a host, the MPI backend's messages and ibverbs RDMA stay as they are.
#pragma once

#include <cstdint>
#include <string>

namespace tutti::transport {

enum class DataSecurity : uint32_t { kOff = 0, kIntegrity = 1, kEncrypt = 2 };

// "off", "integrity", "encrypt".
const char* DataSecurityName(DataSecurity security);
// Parses one of those names; false for anything else.
bool ParseDataSecurity(const std::string& name, DataSecurity* security);

// The AEAD a connection's records use, chosen by the accepting side from what both ends seal
// fastest (transport/handshake.h, the acceptor's proof; FastestAead in record_cipher.h):
// AES-256-GCM or ChaCha20-Poly1305, both OpenSSL's.
enum class RecordAead : uint32_t { kNone = 0, kAes256Gcm = 1, kChaCha20Poly1305 = 2 };

const char* RecordAeadName(RecordAead aead);
// Whether this CPU runs AES-256-GCM in hardware.
bool CpuHasAesGcm();

}  // namespace tutti::transport
