// Out-of-line throwers for the MEGATRON_CHECK family (keeps the macro expansion small).
#include "megatron/core/check.h"

#include <cerrno>
#include <cstring>

namespace megatron {

void throw_error(std::string message) { throw Error(std::move(message)); }

void throw_system_error(std::string message) {
  const int err = errno;
  message += ": ";
  message += std::strerror(err);
  throw Error(std::move(message));
}

}  // namespace megatron
