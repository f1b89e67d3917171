// The TCPStore rendezvous (see c10d_store.h).
#include "megatron/parallel/c10d_store.h"

#include <unistd.h>

#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "megatron/core/check.h"

namespace megatron::parallel {
namespace {

std::string this_host() {
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') return addr;
  char name[HOST_NAME_MAX + 1] = {};
  MEGATRON_CHECK(::gethostname(name, sizeof(name) - 1) == 0, "cannot read this machine's host name for the NCCL rendezvous");
  return name;
}

int requested_port() {
  const char* port = std::getenv("MASTER_PORT");
  if (port == nullptr || *port == '\0') return 0;  // the system picks a free one
  char* end = nullptr;
  const long value = std::strtol(port, &end, 10);
  MEGATRON_CHECK(end != port && *end == '\0' && value > 0 && value < 65536, "MASTER_PORT=", port,
                 " is not a TCP port (1-65535)");
  return static_cast<int>(value);
}

}  // namespace

c10::intrusive_ptr<c10d::Store> make_world_store(Communicator& bootstrap, std::chrono::milliseconds timeout,
                                                 StoreAddress* address) {
  constexpr std::int64_t kAddressBytes = 512;
  at::Tensor packed = at::zeros({kAddressBytes}, at::kByte);
  c10::intrusive_ptr<c10d::TCPStore> server;
  if (bootstrap.rank() == 0) {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(requested_port());
    opts.isServer = true;
    opts.waitWorkers = false;  // the others learn the address only after the server is up
    opts.timeout = timeout;
    const std::string host = this_host();
    try {
      server = c10::make_intrusive<c10d::TCPStore>(host, opts);
    } catch (const std::exception& e) {
      MEGATRON_FAIL("[rank 0] cannot start the NCCL rendezvous store on ", host, ":", opts.port, ": ", e.what());
    }
    const std::string text = host + ":" + std::to_string(server->getPort());
    MEGATRON_CHECK(static_cast<std::int64_t>(text.size()) < kAddressBytes, "host name too long: ", host);
    std::memcpy(packed.data_ptr(), text.data(), text.size());
  }
  bootstrap.broadcast(packed, 0, *bootstrap.world()).wait();
  const std::string text(static_cast<const char*>(packed.data_ptr()));
  const auto colon = text.rfind(':');
  MEGATRON_ASSERT(colon != std::string::npos, "malformed store address ", text);
  StoreAddress where{text.substr(0, colon), std::atoi(text.c_str() + colon + 1)};
  if (address != nullptr) *address = where;
  if (server) return server;
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(where.port);
  opts.isServer = false;
  opts.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(where.host, opts);
  } catch (const std::exception& e) {
    MEGATRON_FAIL("[rank ", bootstrap.rank(), "] cannot reach the NCCL rendezvous store of rank 0 at ", text, ": ",
                  e.what(), " (set MASTER_ADDR to an address of rank 0's node that the other nodes can reach)");
  }
}

}  // namespace megatron::parallel
