// The process-wide single-process ParallelContext (see single_process_context.h).
#include "megatron/parallel/single_process_context.h"

namespace megatron::parallel {

const ParallelContext& single_process_context() {
  static const ParallelState state(ParallelConfig{}, 0);
  static const std::unique_ptr<Communicator> comm = make_single_process_communicator();
  static const ParallelContext context = ParallelContext::create(state, *comm);
  return context;
}

}  // namespace megatron::parallel
