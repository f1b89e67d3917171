// Writing torch.save archives (see torch_save.h): the pickle by write_pickle, the zip records by
// LibTorch's PyTorchStreamWriter, in the order and with the records torch.save gives them.
#include <caffe2/serialize/inline_container.h>

#include "megatron/checkpoint/torch_save.h"
#include "megatron/core/check.h"

namespace megatron::checkpoint {

PickleRef TorchSaveWriter::tensor(const at::Tensor& t) {
  const std::string key = std::to_string(tensors_.size());
  tensors_.push_back(t);
  std::vector<PickleRef> size, stride;
  std::int64_t step = 1;
  for (std::int64_t d = t.dim() - 1; d >= 0; --d) {  // the contiguous strides the data will have
    size.insert(size.begin(), py::integer(t.size(d)));
    stride.insert(stride.begin(), py::integer(step));
    step *= t.size(d);
  }
  PickleRef storage = py::persistent_id(py::tuple({py::str("storage"), py::global(storage_class(t.scalar_type())),
                                                   py::str(key), py::str("cpu"), py::integer(t.numel())}));
  return py::call("torch._utils._rebuild_tensor_v2",
                  {storage, py::integer(0), py::tuple(std::move(size)), py::tuple(std::move(stride)),
                   py::boolean(false), py::call("collections.OrderedDict", {})});
}

std::uint64_t TorchSaveWriter::write(const PickleValue& root, const Sink& sink, bool crc32) const {
  std::uint64_t written = 0;
  caffe2::serialize::PyTorchStreamWriter zip(
      [&](const void* data, std::size_t n) {
        sink(data, n);
        written += n;
        return n;
      },
      crc32);
  const std::string pickle = write_pickle(root);
  zip.writeRecord("data.pkl", pickle.data(), pickle.size());
  zip.writeRecord(".format_version", "1", 1);
  zip.writeRecord(".storage_alignment", "64", 2);
  zip.writeRecord("byteorder", "little", 6);
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const at::Tensor host = tensors_[i].detach().to(at::kCPU).contiguous();
    zip.writeRecord("data/" + std::to_string(i), host.data_ptr(), host.nbytes());
  }
  zip.writeEndOfFile();
  return written;
}

std::string TorchSaveWriter::bytes(const PickleValue& root) const {
  std::string out;
  write(root, [&](const void* data, std::size_t n) { out.append(static_cast<const char*>(data), n); });
  return out;
}

}  // namespace megatron::checkpoint
