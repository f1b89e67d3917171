// LineReader over plain, gzip and zstd files (terminators, BOM, long lines, multi-member and
// multi-frame streams, truncated and corrupt data) and expand_inputs' glob handling. Compressed
// inputs are made here with zlib and libzstd, so the reader is checked against the libraries.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/data/jsonl_reader.h"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMiB = 1 << 20;  // the reader's block size

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            str_cat("megatron_jsonl_", info->name(), "_", ::getpid(), "_", counter++);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One gzip member holding `text`, written by zlib's own gzip writer.
std::string gzip_bytes(const TempDir& dir, const std::string& text) {
  const std::string path = dir / "member.tmp.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  if (f == nullptr) return {};
  if (!text.empty()) {
    EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  }
  EXPECT_EQ(gzclose(f), Z_OK);
  std::string bytes = read_bytes(path);
  fs::remove(path);
  return bytes;
}

// One zstd frame holding `text`.
std::string zstd_bytes(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const std::size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

std::vector<std::string> read_lines(const std::string& path) {
  LineReader reader(path);
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.next(line)) lines.emplace_back(line);
  return lines;
}

// Lines of varied length (some empty, some CRLF) adding up to a few MiB, so that lines straddle
// the reader's 1 MiB blocks and the decoders' internal buffers.
std::string many_lines(std::vector<std::string>& expected) {
  std::string text;
  for (int i = 0; text.size() < 3 * kMiB; ++i) {
    std::string line = str_cat("{\"id\": ", i, ", \"text\": \"");
    line.append(static_cast<std::size_t>((i * 7919) % 1500), static_cast<char>('a' + i % 26));
    line += "\"}";
    if (i % 97 == 0) line.clear();
    expected.push_back(line);
    text += line;
    text += (i % 5 == 0) ? "\r\n" : "\n";
  }
  return text;
}

// Reads the whole error message of what `read_lines(path)` throws ("" when it throws nothing).
std::string read_error(const std::string& path) {
  try {
    read_lines(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LineReader, SplitsOnLfAndStripsCrLf) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "one\ntwo\r\nthree\n");
  EXPECT_EQ(read_lines(dir / "a.jsonl"), (std::vector<std::string>{"one", "two", "three"}));
}

TEST(LineReader, KeepsLoneCarriageReturnInsideLine) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "a\rb\n\r\r\n");
  EXPECT_EQ(read_lines(dir / "a.jsonl"), (std::vector<std::string>{"a\rb", "\r"}));
}

TEST(LineReader, ReturnsLastLineWithoutNewline) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "first\nlast");
  LineReader reader(dir / "a.jsonl");
  std::string_view line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "first");
  EXPECT_TRUE(reader.last_line_had_newline());
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "last");
  EXPECT_FALSE(reader.last_line_had_newline());
  EXPECT_FALSE(reader.next(line));
}

TEST(LineReader, LastLineWithNewlineReportsIt) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "only\r\n");
  LineReader reader(dir / "a.jsonl");
  std::string_view line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "only");
  EXPECT_TRUE(reader.last_line_had_newline());
  EXPECT_FALSE(reader.next(line));
}

TEST(LineReader, KeepsEmptyLines) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "\n\nx\n\r\n\n");
  EXPECT_EQ(read_lines(dir / "a.jsonl"), (std::vector<std::string>{"", "", "x", "", ""}));
}

TEST(LineReader, EmptyFileHasNoLines) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "");
  LineReader reader(dir / "a.jsonl");
  std::string_view line;
  EXPECT_FALSE(reader.next(line));
  EXPECT_EQ(reader.line_number(), 0u);
}

TEST(LineReader, DropsByteOrderMarkOnlyAtFileStart) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "\xEF\xBB\xBF{\"a\": 1}\n\xEF\xBB\xBF{\"b\": 2}\n");
  EXPECT_EQ(read_lines(dir / "a.jsonl"), (std::vector<std::string>{"{\"a\": 1}", "\xEF\xBB\xBF{\"b\": 2}"}));
}

TEST(LineReader, ByteOrderMarkBeforeEmptyFirstLineLeavesEmptyLine) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "\xEF\xBB\xBF\nx\n");
  EXPECT_EQ(read_lines(dir / "a.jsonl"), (std::vector<std::string>{"", "x"}));
}

TEST(LineReader, CountsLinesFromOne) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "a\n\nc");
  LineReader reader(dir / "a.jsonl");
  std::string_view line;
  EXPECT_EQ(reader.line_number(), 0u);
  std::vector<std::uint64_t> numbers;
  while (reader.next(line)) numbers.push_back(reader.line_number());
  EXPECT_EQ(numbers, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(reader.line_number(), 3u);  // unchanged by the final false
}

TEST(LineReader, ReadsLineLongerThanBlockIntact) {
  TempDir dir;
  std::string big;
  big.reserve(3'000'000);
  for (std::size_t i = 0; big.size() < 3'000'000; ++i) big += static_cast<char>('a' + i % 26);
  write_bytes(dir / "a.jsonl", "short\n" + big + "\r\ntail\n");
  const auto lines = read_lines(dir / "a.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "short");
  EXPECT_EQ(lines[1].size(), big.size());
  EXPECT_TRUE(lines[1] == big);  // not EXPECT_EQ: a failure would print 3 MB
  EXPECT_EQ(lines[2], "tail");
}

TEST(LineReader, StripsCrLfSplitAcrossBlockBoundary) {
  TempDir dir;
  // '\r' is the last byte of the first 1 MiB block, '\n' the first byte of the second.
  const std::string first(kMiB - 1, 'x');
  write_bytes(dir / "a.jsonl", first + "\r\ny\n");
  const auto lines = read_lines(dir / "a.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0] == first) << "size " << lines[0].size();
  EXPECT_EQ(lines[1], "y");
}

TEST(LineReader, ReadsManyLinesAcrossBlocks) {
  TempDir dir;
  std::vector<std::string> expected;
  write_bytes(dir / "a.jsonl", many_lines(expected));
  EXPECT_TRUE(read_lines(dir / "a.jsonl") == expected);
}

TEST(LineReader, PlainFileCountsAllBytesRead) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "abc\ndef\n");
  LineReader reader(dir / "a.jsonl");
  EXPECT_EQ(reader.compression(), Compression::kNone);
  std::string_view line;
  while (reader.next(line)) {
  }
  EXPECT_EQ(reader.file_bytes_read(), 8u);
}

TEST(LineReader, GzipFileGivesSameLinesAsPlainFile) {
  TempDir dir;
  std::vector<std::string> expected;
  const std::string text = many_lines(expected);
  write_bytes(dir / "a.jsonl", text);
  write_bytes(dir / "a.jsonl.gz", gzip_bytes(dir, text));
  LineReader reader(dir / "a.jsonl.gz");
  EXPECT_EQ(reader.compression(), Compression::kGzip);
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.next(line)) lines.emplace_back(line);
  EXPECT_TRUE(lines == read_lines(dir / "a.jsonl"));
  EXPECT_TRUE(lines == expected);
  EXPECT_EQ(reader.file_bytes_read(), fs::file_size(dir / "a.jsonl.gz"));
}

TEST(LineReader, ReadsAllMembersOfConcatenatedGzip) {
  TempDir dir;
  // The second member starts in the middle of a line.
  write_bytes(dir / "a.jsonl.gz", gzip_bytes(dir, "a\nb\nhal") + gzip_bytes(dir, "f\nc\n") + gzip_bytes(dir, "d"));
  LineReader reader(dir / "a.jsonl.gz");
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.next(line)) lines.emplace_back(line);
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b", "half", "c", "d"}));
  EXPECT_FALSE(reader.last_line_had_newline());
}

TEST(LineReader, ReadsGzipWithEmptyMember) {
  TempDir dir;
  write_bytes(dir / "a.jsonl.gz", gzip_bytes(dir, "x\n") + gzip_bytes(dir, "") + gzip_bytes(dir, "y\n"));
  EXPECT_EQ(read_lines(dir / "a.jsonl.gz"), (std::vector<std::string>{"x", "y"}));
}

TEST(LineReader, DetectsGzipByMagicWhateverTheName) {
  TempDir dir;
  write_bytes(dir / "corpus.jsonl", gzip_bytes(dir, "{\"text\": \"x\"}\n"));
  LineReader reader(dir / "corpus.jsonl");
  EXPECT_EQ(reader.compression(), Compression::kGzip);
  std::string_view line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "{\"text\": \"x\"}");
}

TEST(LineReader, ZstdFileGivesSameLinesAsPlainFile) {
  TempDir dir;
  std::vector<std::string> expected;
  const std::string text = many_lines(expected);
  write_bytes(dir / "a.jsonl", text);
  write_bytes(dir / "a.jsonl.zst", zstd_bytes(text));
  LineReader reader(dir / "a.jsonl.zst");
  EXPECT_EQ(reader.compression(), Compression::kZstd);
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.next(line)) lines.emplace_back(line);
  EXPECT_TRUE(lines == read_lines(dir / "a.jsonl"));
  EXPECT_TRUE(lines == expected);
  EXPECT_EQ(reader.file_bytes_read(), fs::file_size(dir / "a.jsonl.zst"));
}

TEST(LineReader, ReadsAllFramesOfConcatenatedZstd) {
  TempDir dir;
  write_bytes(dir / "a.jsonl.zst", zstd_bytes("a\nb\nhal") + zstd_bytes("f\nc\n") + zstd_bytes("d\n"));
  EXPECT_EQ(read_lines(dir / "a.jsonl.zst"), (std::vector<std::string>{"a", "b", "half", "c", "d"}));
}

TEST(LineReader, ReadsZstdFramesOfSeveralMiB) {
  TempDir dir;
  std::vector<std::string> first;
  std::vector<std::string> second;
  const std::string a = many_lines(first);
  const std::string b = many_lines(second);
  write_bytes(dir / "a.jsonl.zstd", zstd_bytes(a) + zstd_bytes(b));
  std::vector<std::string> expected = first;
  expected.insert(expected.end(), second.begin(), second.end());
  EXPECT_TRUE(read_lines(dir / "a.jsonl.zstd") == expected);
}

// Decompressed bytes are the same whatever the caller's buffer size: a decoder holding output
// when its input is used up must still hand it over.
TEST(ByteSource, SmallReadsGiveAllBytesOfEveryFormat) {
  TempDir dir;
  std::vector<std::string> unused;
  const std::string text = many_lines(unused).substr(0, 600'000);
  write_bytes(dir / "plain.jsonl", text);
  write_bytes(dir / "gz.jsonl.gz", gzip_bytes(dir, text) + gzip_bytes(dir, text));
  write_bytes(dir / "zst.jsonl.zst", zstd_bytes(text) + zstd_bytes(text));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plain.jsonl", text}, {"gz.jsonl.gz", text + text}, {"zst.jsonl.zst", text + text}};
  for (const auto& [name, want] : cases) {
    for (const std::size_t capacity : {std::size_t{1}, std::size_t{1000}, std::size_t{65537}}) {
      Compression compression = Compression::kNone;
      const auto source = open_byte_source(dir / name, compression);
      std::string got;
      std::vector<char> buffer(capacity);
      std::size_t n = 0;
      while ((n = source->read(buffer.data(), capacity)) > 0) got.append(buffer.data(), n);
      EXPECT_TRUE(got == want) << name << " capacity " << capacity << ": got " << got.size() << " bytes of "
                               << want.size();
      EXPECT_EQ(source->file_bytes_read(), fs::file_size(dir / name)) << name;
    }
  }
}

TEST(ByteSource, NamesCompressions) {
  EXPECT_STREQ(compression_name(Compression::kNone), "none");
  EXPECT_STREQ(compression_name(Compression::kGzip), "gzip");
  EXPECT_STREQ(compression_name(Compression::kZstd), "zstd");
}

TEST(LineReader, RejectsTruncatedGzipNamingFile) {
  TempDir dir;
  std::vector<std::string> unused;
  const std::string gz = gzip_bytes(dir, many_lines(unused));
  const std::string path = dir / "cut.jsonl.gz";
  for (const std::size_t keep : {gz.size() / 2, gz.size() - 4}) {  // inside the data; inside the trailer
    write_bytes(path, gz.substr(0, keep));
    const std::string error = read_error(path);
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find("truncated gzip"), std::string::npos) << "keep " << keep << ": " << error;
  }
}

TEST(LineReader, RejectsTruncatedSecondGzipMember) {
  TempDir dir;
  const std::string second = gzip_bytes(dir, "c\nd\n");
  write_bytes(dir / "a.gz", gzip_bytes(dir, "a\nb\n") + second.substr(0, second.size() - 3));
  const std::string error = read_error(dir / "a.gz");
  EXPECT_NE(error.find("truncated gzip"), std::string::npos) << error;
}

TEST(LineReader, RejectsTruncatedZstdNamingFile) {
  TempDir dir;
  std::vector<std::string> unused;
  const std::string zst = zstd_bytes(many_lines(unused));
  const std::string path = dir / "cut.jsonl.zst";
  for (const std::size_t keep : {zst.size() / 2, zst.size() - 1}) {
    write_bytes(path, zst.substr(0, keep));
    const std::string error = read_error(path);
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find("truncated zstd"), std::string::npos) << "keep " << keep << ": " << error;
  }
}

TEST(LineReader, RejectsGzipWithBadChecksum) {
  TempDir dir;
  std::string gz = gzip_bytes(dir, "{\"text\": \"hello\"}\n");
  gz[gz.size() - 8] = static_cast<char>(gz[gz.size() - 8] ^ 0x5A);  // first byte of the CRC-32
  write_bytes(dir / "bad.jsonl.gz", gz);
  const std::string error = read_error(dir / "bad.jsonl.gz");
  EXPECT_NE(error.find(dir / "bad.jsonl.gz"), std::string::npos) << error;
  EXPECT_NE(error.find("corrupt gzip"), std::string::npos) << error;
}

TEST(LineReader, RejectsGzipWithGarbledData) {
  TempDir dir;
  std::string gz = gzip_bytes(dir, std::string(10000, 'q') + "\n");
  for (std::size_t i = 10; i + 8 < gz.size(); ++i) gz[i] = '\xFF';  // keep header and trailer
  write_bytes(dir / "bad.gz", gz);
  EXPECT_NE(read_error(dir / "bad.gz").find("corrupt gzip"), std::string::npos);
}

TEST(LineReader, RejectsGarbageAfterGzipMember) {
  TempDir dir;
  write_bytes(dir / "bad.gz", gzip_bytes(dir, "a\n") + "not gzip\n");
  EXPECT_NE(read_error(dir / "bad.gz").find("corrupt gzip"), std::string::npos);
}

TEST(LineReader, RejectsCorruptZstd) {
  TempDir dir;
  std::string zst = zstd_bytes("{\"text\": \"hello\"}\n");
  zst[4] = static_cast<char>(zst[4] | 0x08);  // a reserved bit of the frame header descriptor
  write_bytes(dir / "bad.zst", zst);
  const std::string error = read_error(dir / "bad.zst");
  EXPECT_NE(error.find(dir / "bad.zst"), std::string::npos) << error;
  EXPECT_NE(error.find("corrupt zstd"), std::string::npos) << error;
}

TEST(LineReader, RejectsGzNameWithoutGzipBytes) {
  TempDir dir;
  write_bytes(dir / "plain.jsonl.gz", "{\"text\": \"x\"}\n");
  EXPECT_THROW(LineReader(dir / "plain.jsonl.gz"), Error);
  const std::string error = read_error(dir / "plain.jsonl.gz");
  EXPECT_NE(error.find(dir / "plain.jsonl.gz"), std::string::npos) << error;
  EXPECT_NE(error.find("gzip magic"), std::string::npos) << error;
}

TEST(LineReader, RejectsZstNameWithoutZstdBytes) {
  TempDir dir;
  write_bytes(dir / "a.jsonl.zst", gzip_bytes(dir, "x\n"));  // gzip bytes are not zstd
  const std::string error = read_error(dir / "a.jsonl.zst");
  EXPECT_NE(error.find("zstd magic"), std::string::npos) << error;
}

TEST(LineReader, RejectsMissingFileNamingIt) {
  TempDir dir;
  const std::string path = dir / "missing.jsonl";
  EXPECT_THROW(LineReader{path}, Error);
  EXPECT_NE(read_error(path).find(path), std::string::npos) << read_error(path);
}

TEST(ExpandInputs, SortsGlobMatches) {
  TempDir dir;
  for (const char* name : {"c.jsonl", "a.jsonl", "b.jsonl", "notes.txt"}) write_bytes(dir / name, "x\n");
  EXPECT_EQ(expand_inputs({dir / "*.jsonl"}),
            (std::vector<std::string>{dir / "a.jsonl", dir / "b.jsonl", dir / "c.jsonl"}));
  EXPECT_EQ(expand_inputs({dir / "?.json[l]"}),
            (std::vector<std::string>{dir / "a.jsonl", dir / "b.jsonl", dir / "c.jsonl"}));
}

TEST(ExpandInputs, KeepsPlainPathsInGivenOrder) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "x\n");
  write_bytes(dir / "b.jsonl", "x\n");
  EXPECT_EQ(expand_inputs({dir / "b.jsonl", dir / "a.jsonl"}),
            (std::vector<std::string>{dir / "b.jsonl", dir / "a.jsonl"}));
}

TEST(ExpandInputs, ConcatenatesPatternsInOrder) {
  TempDir dir;
  for (const char* name : {"x1.jsonl", "x0.jsonl", "a.jsonl"}) write_bytes(dir / name, "x\n");
  EXPECT_EQ(expand_inputs({dir / "x*.jsonl", dir / "a.jsonl"}),
            (std::vector<std::string>{dir / "x0.jsonl", dir / "x1.jsonl", dir / "a.jsonl"}));
}

TEST(ExpandInputs, RejectsGlobMatchingNothingNamingPattern) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "x\n");
  const std::string pattern = dir / "*.parquet";
  try {
    expand_inputs({dir / "a.jsonl", pattern});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(pattern), std::string::npos) << message;
    EXPECT_NE(message.find("matches no file"), std::string::npos) << message;
  }
}

TEST(ExpandInputs, RejectsMissingPlainPathNamingIt) {
  TempDir dir;
  const std::string path = dir / "missing.jsonl";
  try {
    expand_inputs({path});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(ExpandInputs, RejectsGlobMatchingFolder) {
  TempDir dir;
  write_bytes(dir / "a.jsonl", "x\n");
  fs::create_directories(dir / "b.jsonl");
  try {
    expand_inputs({dir / "*.jsonl"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(dir / "b.jsonl"), std::string::npos) << message;
    EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace megatron::data
