// .npy reading (mapped, header parsed) and writing (numpy.save's exact bytes), see npy.h.
#include "megatron/data/npy.h"

#include <cctype>
#include <cstring>
#include <optional>
#include <string_view>

namespace megatron::data {
namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kArrayAlign = 64;
constexpr std::size_t kGrowthAxisMaxDigits = 21;

struct DTypeInfo {
  NpyDType dtype;
  const char* descr;
  const char* name;
  std::size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {NpyDType::kInt8, "|i1", "int8", 1},       {NpyDType::kUInt8, "|u1", "uint8", 1},
    {NpyDType::kInt16, "<i2", "int16", 2},     {NpyDType::kUInt16, "<u2", "uint16", 2},
    {NpyDType::kInt32, "<i4", "int32", 4},     {NpyDType::kUInt32, "<u4", "uint32", 4},
    {NpyDType::kInt64, "<i8", "int64", 8},     {NpyDType::kUInt64, "<u8", "uint64", 8},
    {NpyDType::kFloat32, "<f4", "float32", 4}, {NpyDType::kFloat64, "<f8", "float64", 8},
};

const DTypeInfo& info(NpyDType dtype) { return kDTypes[static_cast<std::size_t>(dtype)]; }

std::optional<NpyDType> dtype_from_descr(std::string_view descr) {
  for (const DTypeInfo& entry : kDTypes) {
    if (descr == entry.descr) return entry.dtype;
    // Single-byte types may also be spelt with '<' or '='; little-endian native '=' too.
    if (descr.size() == 3 && (descr[0] == '=' || (entry.size == 1 && descr[0] == '<')) &&
        descr.substr(1) == std::string_view(entry.descr).substr(1)) {
      return entry.dtype;
    }
  }
  return std::nullopt;
}

// The header dictionary, e.g. {'descr': '<i4', 'fortran_order': False, 'shape': (10,), }
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
  bool has_descr = false, has_order = false, has_shape = false;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  Header parse() {
    Header header;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr") {
        header.descr = string_literal();
        header.has_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = boolean();
        header.has_order = true;
      } else if (key == "shape") {
        header.shape = tuple();
        header.has_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') ++pos_;
    }
    if (!header.has_descr || !header.has_order || !header.has_shape) {
      fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    MEGATRON_FAIL(path_, ": malformed .npy header (", what, "): ", text_);
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return value;
  }
  bool boolean() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  std::vector<std::uint64_t> tuple() {
    expect('(');
    std::vector<std::uint64_t> values;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a dimension");
      std::uint64_t value = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        value = value * 10 + static_cast<std::uint64_t>(text_[pos_++] - '0');
      }
      if (peek() == 'L') ++pos_;  // Python 2 long literals
      values.push_back(value);
      skip_space();
      if (peek() == ',') ++pos_;
    }
    ++pos_;
    return values;
  }

  std::string_view text_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

std::string shape_repr(std::span<const std::uint64_t> shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

}  // namespace

std::size_t npy_dtype_size(NpyDType dtype) { return info(dtype).size; }
const char* npy_dtype_descr(NpyDType dtype) { return info(dtype).descr; }
const char* npy_dtype_name(NpyDType dtype) { return info(dtype).name; }

NpyArray NpyArray::map(const std::string& path) {
  NpyArray array;
  array.file_ = MappedFile(path);
  const std::uint8_t* bytes = array.file_.data();
  const std::uint64_t file_size = array.file_.size();
  MEGATRON_CHECK(file_size >= 10 && std::memcmp(bytes, kMagic, sizeof(kMagic)) == 0, path,
                 ": not a .npy file (no \\x93NUMPY magic)");
  const unsigned major = bytes[6];
  MEGATRON_CHECK(major >= 1 && major <= 3, path, ": unsupported .npy format version ", major, ".",
                 static_cast<unsigned>(bytes[7]));
  std::uint64_t header_length = 0;
  std::uint64_t prefix = 10;
  if (major == 1) {
    header_length =
        static_cast<std::uint64_t>(bytes[8]) | (static_cast<std::uint64_t>(bytes[9]) << 8);
  } else {
    MEGATRON_CHECK(file_size >= 12, path, ": truncated .npy header");
    for (int i = 3; i >= 0; --i) header_length = (header_length << 8) | bytes[8 + i];
    prefix = 12;
  }
  MEGATRON_CHECK(prefix + header_length <= file_size, path, ": truncated .npy header (",
                 header_length, " header bytes announced, file has ", file_size, ")");
  const std::string_view text(reinterpret_cast<const char*>(bytes + prefix), header_length);
  const Header header = HeaderParser(text, path).parse();

  const std::optional<NpyDType> dtype = dtype_from_descr(header.descr);
  MEGATRON_CHECK(dtype.has_value(), path, ": unsupported .npy dtype '", header.descr,
                 "' (little-endian integers and floats only)");
  MEGATRON_CHECK(!header.fortran_order || header.shape.size() <= 1, path,
                 ": Fortran-order arrays are not supported");
  array.dtype_ = *dtype;
  array.shape_ = header.shape;
  array.count_ = 1;
  for (std::uint64_t dim : header.shape) array.count_ *= dim;

  const std::uint64_t offset = prefix + header_length;
  const std::uint64_t data_bytes = array.count_ * npy_dtype_size(*dtype);
  MEGATRON_CHECK(file_size - offset == data_bytes, path, ": the data holds ", file_size - offset,
                 " bytes but shape ", shape_repr(header.shape), " of ", npy_dtype_name(*dtype),
                 " needs ", data_bytes, " (truncated or corrupt file)");
  array.data_ = bytes + offset;
  if (offset % npy_dtype_size(*dtype) != 0) {
    array.copy_.resize((data_bytes + 7) / 8);
    std::memcpy(array.copy_.data(), bytes + offset, data_bytes);
    array.data_ = array.copy_.data();
  }
  return array;
}

std::string npy_header(NpyDType dtype, std::span<const std::uint64_t> shape) {
  std::string dict = std::string("{'descr': '") + npy_dtype_descr(dtype) +
                     "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  if (!shape.empty()) {
    const std::size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  const std::size_t header_length = dict.size() + 1;  // with the final '\n'
  const std::size_t padding =
      kArrayAlign - ((sizeof(kMagic) + 2 + 2 + header_length) % kArrayAlign);
  const std::size_t total = header_length + padding;
  MEGATRON_ASSERT(total <= 0xffff, "npy header too long for format 1.0");
  std::string out(kMagic, sizeof(kMagic));
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(total & 0xff);
  out += static_cast<char>((total >> 8) & 0xff);
  out += dict;
  out.append(padding, ' ');
  out += '\n';
  return out;
}

void write_npy(AtomicFile& file, NpyDType dtype, std::span<const std::uint64_t> shape,
               const void* data) {
  const std::string header = npy_header(dtype, shape);
  file.write(header.data(), header.size());
  std::uint64_t count = 1;
  for (std::uint64_t dim : shape) count *= dim;
  file.write(data, count * npy_dtype_size(dtype));
}

IndexArray IndexArray::from_npy(NpyArray npy) {
  IndexArray array;
  auto owner = std::make_shared<NpyArray>(std::move(npy));
  array.dtype_ = owner->dtype();
  array.shape_ = owner->shape();
  array.count_ = owner->size();
  array.data_ = owner->raw_data();
  array.owner_ = std::move(owner);
  array.mapped_ = true;
  return array;
}

std::int64_t IndexArray::at(std::uint64_t i) const {
  MEGATRON_ASSERT(i < count_, "index ", i, " out of range ", count_);
  switch (dtype_) {
    case NpyDType::kInt8:
      return static_cast<const std::int8_t*>(data_)[i];
    case NpyDType::kUInt8:
      return static_cast<const std::uint8_t*>(data_)[i];
    case NpyDType::kInt16:
      return static_cast<const std::int16_t*>(data_)[i];
    case NpyDType::kUInt16:
      return static_cast<const std::uint16_t*>(data_)[i];
    case NpyDType::kInt32:
      return static_cast<const std::int32_t*>(data_)[i];
    case NpyDType::kUInt32:
      return static_cast<const std::uint32_t*>(data_)[i];
    case NpyDType::kInt64:
      return static_cast<const std::int64_t*>(data_)[i];
    case NpyDType::kUInt64:
      return static_cast<std::int64_t>(static_cast<const std::uint64_t*>(data_)[i]);
    case NpyDType::kFloat32:
    case NpyDType::kFloat64:
      break;
  }
  MEGATRON_FAIL("index array of ", npy_dtype_name(dtype_), " holds no integer indices");
}

}  // namespace megatron::data
