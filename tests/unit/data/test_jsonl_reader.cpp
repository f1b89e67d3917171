// LineReader over plain, gzip and zstd files (terminators, BOM, UTF-16, long lines, multi-member
// and multi-frame streams, zero padding, truncated and corrupt data) and expand_inputs' globs.
// Compressed inputs are made here with zlib and libzstd, so the reader is checked against them.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "megatron/core/check.h"
#include "megatron/data/jsonl_reader.h"
#include "test_support.h"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;
using megatron::testing::read_file_bytes;
using megatron::testing::TempDir;

constexpr std::size_t kMiB = 1 << 20;  // the reader's block size

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
  std::string bytes = read_file_bytes(path);
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

// The lines `reader` has left.
std::vector<std::string> remaining_lines(LineReader& reader) {
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.next(line)) lines.emplace_back(line);
  return lines;
}

std::vector<std::string> read_lines(const std::string& path) {
  LineReader reader(path);
  return remaining_lines(reader);
}

// The lines read back from a file named `name` (in a fresh temporary folder) holding `bytes`.
std::vector<std::string> lines_of(const std::string& bytes, const std::string& name = "a.jsonl") {
  const TempDir dir;
  return read_lines(dir.write(name, bytes));
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

// Expects the file at `path`, `text` compressed, to be read as `compression`, to give `expected`
// (the lines of `text`) just as a plain file holding `text` does, and to count all its bytes.
void expect_same_lines_as_plain(const std::string& path, Compression compression,
                                const std::string& text, const std::vector<std::string>& expected) {
  LineReader reader(path);
  EXPECT_EQ(reader.compression(), compression);
  const std::vector<std::string> lines = remaining_lines(reader);
  EXPECT_TRUE(lines == lines_of(text));
  EXPECT_TRUE(lines == expected);
  EXPECT_EQ(reader.file_bytes_read(), fs::file_size(path));
}

// Expects `bytes` cut to each of `keeps` bytes, written as `name` in `dir`, to fail with an error
// naming the file and saying `what` ("truncated gzip").
void expect_cuts_rejected(const TempDir& dir, const std::string& name, const std::string& bytes,
                          std::initializer_list<std::size_t> keeps, const std::string& what) {
  for (const std::size_t keep : keeps) {
    const std::string path = dir.write(name, bytes.substr(0, keep));
    const std::string error = read_error(path);
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find(what), std::string::npos) << "keep " << keep << ": " << error;
  }
}

TEST(LineReader, SplitsOnLfAndStripsCrLf) {
  EXPECT_EQ(lines_of("one\ntwo\r\nthree\n"), (std::vector<std::string>{"one", "two", "three"}));
}

// Python's universal newlines (open(path, encoding="utf-8") iterated): list(f) gives
// ['a\n', 'b\n', '\n', '\n'] for this file.
TEST(LineReader, EndsLinesAtLoneCarriageReturnAsPython) {
  EXPECT_EQ(lines_of("a\rb\n\r\r\n"), (std::vector<std::string>{"a", "b", "", ""}));
  EXPECT_EQ(lines_of("{\"text\": \"x\"}\r{\"text\": \"y\"}\r"),
            (std::vector<std::string>{"{\"text\": \"x\"}", "{\"text\": \"y\"}"}));
}

// Only CR, LF and CRLF end lines: VT, FF, FS, NEL, U+2028 (str.splitlines() boundaries) stay.
TEST(LineReader, KeepsOtherLineBoundariesInsideLine) {
  const std::string line = "x\x0By\x0Cz\x1C\xC2\x85w\xE2\x80\xA8v";
  EXPECT_EQ(lines_of(line + "\n"), (std::vector<std::string>{line}));
}

TEST(LineReader, LoneCarriageReturnAtEndOfFileEndsLastLine) {
  TempDir dir;
  LineReader reader(dir.write("a.jsonl", "a\rb\r"));
  EXPECT_EQ(remaining_lines(reader), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(reader.last_line_had_newline());
}

TEST(LineReader, LoneCarriageReturnAtBlockBoundaryEndsLine) {
  // '\r' is the last byte of the first 1 MiB block and no '\n' follows it.
  const std::string first(kMiB - 1, 'x');
  const auto lines = lines_of(first + "\ry\rz");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(lines[0] == first) << "size " << lines[0].size();
  EXPECT_EQ(lines[1], "y");
  EXPECT_EQ(lines[2], "z");
}

TEST(LineReader, RejectsUtf16NamingIt) {
  TempDir dir;
  const std::string le("{\0\"\0t\0\"\0:\0 \0\"\0x\0\"\0}\0\n\0", 22);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"le.jsonl", le},
      {"be.jsonl", std::string(1, '\0') + le.substr(0, le.size() - 1)},
      {"bom_le.jsonl", "\xFF\xFE" + le},
      {"bom_be.jsonl.gz", gzip_bytes(dir, "\xFE\xFF" + std::string(1, '\0') + le)}};
  for (const auto& [name, bytes] : cases) {
    const std::string path = dir.write(name, bytes);
    const std::string error = read_error(path);
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find("looks like UTF-16"), std::string::npos) << name << ": " << error;
  }
  EXPECT_EQ(read_error(dir.write("one_byte.jsonl", "x")), "");
}

TEST(LineReader, ReturnsLastLineWithoutNewline) {
  TempDir dir;
  LineReader reader(dir.write("a.jsonl", "first\nlast"));
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
  LineReader reader(dir.write("a.jsonl", "only\r\n"));
  std::string_view line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "only");
  EXPECT_TRUE(reader.last_line_had_newline());
  EXPECT_FALSE(reader.next(line));
}

TEST(LineReader, KeepsEmptyLines) {
  EXPECT_EQ(lines_of("\n\nx\n\r\n\n"), (std::vector<std::string>{"", "", "x", "", ""}));
}

TEST(LineReader, EmptyFileHasNoLines) {
  TempDir dir;
  LineReader reader(dir.write("a.jsonl", ""));
  std::string_view line;
  EXPECT_FALSE(reader.next(line));
  EXPECT_EQ(reader.line_number(), 0u);
}

TEST(LineReader, DropsByteOrderMarkOnlyAtFileStart) {
  EXPECT_EQ(lines_of("\xEF\xBB\xBF{\"a\": 1}\n\xEF\xBB\xBF{\"b\": 2}\n"),
            (std::vector<std::string>{"{\"a\": 1}", "\xEF\xBB\xBF{\"b\": 2}"}));
}

TEST(LineReader, ByteOrderMarkBeforeEmptyFirstLineLeavesEmptyLine) {
  EXPECT_EQ(lines_of("\xEF\xBB\xBF\nx\n"), (std::vector<std::string>{"", "x"}));
}

TEST(LineReader, CountsLinesFromOne) {
  TempDir dir;
  LineReader reader(dir.write("a.jsonl", "a\n\nc"));
  std::string_view line;
  EXPECT_EQ(reader.line_number(), 0u);
  std::vector<std::uint64_t> numbers;
  while (reader.next(line)) numbers.push_back(reader.line_number());
  EXPECT_EQ(numbers, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(reader.line_number(), 3u);  // unchanged by the final false
}

TEST(LineReader, ReadsLineLongerThanBlockIntact) {
  std::string big;
  big.reserve(3'000'000);
  for (std::size_t i = 0; big.size() < 3'000'000; ++i) big += static_cast<char>('a' + i % 26);
  const auto lines = lines_of("short\n" + big + "\r\ntail\n");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "short");
  EXPECT_EQ(lines[1].size(), big.size());
  EXPECT_TRUE(lines[1] == big);  // not EXPECT_EQ: a failure would print 3 MB
  EXPECT_EQ(lines[2], "tail");
}

TEST(LineReader, StripsCrLfSplitAcrossBlockBoundary) {
  // '\r' is the last byte of the first 1 MiB block, '\n' the first byte of the second.
  const std::string first(kMiB - 1, 'x');
  const auto lines = lines_of(first + "\r\ny\n");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0] == first) << "size " << lines[0].size();
  EXPECT_EQ(lines[1], "y");
}

TEST(LineReader, ReadsManyLinesAcrossBlocks) {
  std::vector<std::string> expected;
  const std::string text = many_lines(expected);
  EXPECT_TRUE(lines_of(text) == expected);
}

TEST(LineReader, PlainFileCountsAllBytesRead) {
  TempDir dir;
  LineReader reader(dir.write("a.jsonl", "abc\ndef\n"));
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
  const std::string path = dir.write("a.jsonl.gz", gzip_bytes(dir, text));
  expect_same_lines_as_plain(path, Compression::kGzip, text, expected);
}

TEST(LineReader, ReadsAllMembersOfConcatenatedGzip) {
  TempDir dir;
  // The second member starts in the middle of a line.
  const std::string gz = gzip_bytes(dir, "a\nb\nhal") + gzip_bytes(dir, "f\nc\n") + gzip_bytes(dir, "d");
  LineReader reader(dir.write("a.jsonl.gz", gz));
  EXPECT_EQ(remaining_lines(reader), (std::vector<std::string>{"a", "b", "half", "c", "d"}));
  EXPECT_FALSE(reader.last_line_had_newline());
}

TEST(LineReader, ReadsGzipWithEmptyMember) {
  TempDir dir;
  const std::string gz = gzip_bytes(dir, "x\n") + gzip_bytes(dir, "") + gzip_bytes(dir, "y\n");
  EXPECT_EQ(read_lines(dir.write("a.jsonl.gz", gz)), (std::vector<std::string>{"x", "y"}));
}

TEST(LineReader, DetectsGzipByMagicWhateverTheName) {
  TempDir dir;
  LineReader reader(dir.write("corpus.jsonl", gzip_bytes(dir, "{\"text\": \"x\"}\n")));
  EXPECT_EQ(reader.compression(), Compression::kGzip);
  std::string_view line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "{\"text\": \"x\"}");
}

TEST(LineReader, ZstdFileGivesSameLinesAsPlainFile) {
  TempDir dir;
  std::vector<std::string> expected;
  const std::string text = many_lines(expected);
  const std::string path = dir.write("a.jsonl.zst", zstd_bytes(text));
  expect_same_lines_as_plain(path, Compression::kZstd, text, expected);
}

TEST(LineReader, ReadsAllFramesOfConcatenatedZstd) {
  const std::string zst = zstd_bytes("a\nb\nhal") + zstd_bytes("f\nc\n") + zstd_bytes("d\n");
  EXPECT_EQ(lines_of(zst, "a.jsonl.zst"), (std::vector<std::string>{"a", "b", "half", "c", "d"}));
}

TEST(LineReader, ReadsZstdFramesOfSeveralMiB) {
  std::vector<std::string> first;
  std::vector<std::string> second;
  const std::string a = many_lines(first);
  const std::string b = many_lines(second);
  std::vector<std::string> expected = first;
  expected.insert(expected.end(), second.begin(), second.end());
  EXPECT_TRUE(lines_of(zstd_bytes(a) + zstd_bytes(b), "a.jsonl.zstd") == expected);
}

// Decompressed bytes are the same whatever the caller's buffer size: a decoder holding output
// when its input is used up must still hand it over.
TEST(ByteSource, SmallReadsGiveAllBytesOfEveryFormat) {
  TempDir dir;
  std::vector<std::string> unused;
  const std::string text = many_lines(unused).substr(0, 600'000);
  dir.write("plain.jsonl", text);
  dir.write("gz.jsonl.gz", gzip_bytes(dir, text) + gzip_bytes(dir, text));
  dir.write("zst.jsonl.zst", zstd_bytes(text) + zstd_bytes(text));
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
  // Cut inside the data; inside the trailer.
  expect_cuts_rejected(dir, "cut.jsonl.gz", gz, {gz.size() / 2, gz.size() - 4}, "truncated gzip");
}

TEST(LineReader, RejectsTruncatedSecondGzipMember) {
  TempDir dir;
  const std::string second = gzip_bytes(dir, "c\nd\n");
  const std::string gz = gzip_bytes(dir, "a\nb\n") + second.substr(0, second.size() - 3);
  const std::string error = read_error(dir.write("a.gz", gz));
  EXPECT_NE(error.find("truncated gzip"), std::string::npos) << error;
}

TEST(LineReader, RejectsTruncatedZstdNamingFile) {
  TempDir dir;
  std::vector<std::string> unused;
  const std::string zst = zstd_bytes(many_lines(unused));
  expect_cuts_rejected(dir, "cut.jsonl.zst", zst, {zst.size() / 2, zst.size() - 1}, "truncated zstd");
}

TEST(LineReader, RejectsGzipWithBadChecksum) {
  TempDir dir;
  std::string gz = gzip_bytes(dir, "{\"text\": \"hello\"}\n");
  gz[gz.size() - 8] = static_cast<char>(gz[gz.size() - 8] ^ 0x5A);  // first byte of the CRC-32
  const std::string error = read_error(dir.write("bad.jsonl.gz", gz));
  EXPECT_NE(error.find(dir / "bad.jsonl.gz"), std::string::npos) << error;
  EXPECT_NE(error.find("corrupt gzip"), std::string::npos) << error;
}

TEST(LineReader, RejectsGzipWithGarbledData) {
  TempDir dir;
  std::string gz = gzip_bytes(dir, std::string(10000, 'q') + "\n");
  for (std::size_t i = 10; i + 8 < gz.size(); ++i) gz[i] = '\xFF';  // keep header and trailer
  EXPECT_NE(read_error(dir.write("bad.gz", gz)).find("corrupt gzip"), std::string::npos);
}

// gzip -t accepts zero bytes after the last member ("trailing zero bytes ignored"): tape and
// block-device copies pad files so.
TEST(LineReader, IgnoresZeroPaddingAfterLastGzipMember) {
  TempDir dir;
  const std::string gz = gzip_bytes(dir, "a\nb\n") + gzip_bytes(dir, "c\n");
  for (const std::size_t zeros : {std::size_t{1}, std::size_t{512}, 3 * kMiB}) {
    const std::string path = dir.write("padded.jsonl.gz", gz + std::string(zeros, '\0'));
    LineReader reader(path);
    EXPECT_EQ(remaining_lines(reader), (std::vector<std::string>{"a", "b", "c"})) << zeros << " zeros";
    EXPECT_EQ(reader.file_bytes_read(), fs::file_size(path));
  }
}

TEST(LineReader, RejectsDataAfterGzipZeroPadding) {
  TempDir dir;
  const std::string gz = gzip_bytes(dir, "a\n") + std::string(10, '\0') + gzip_bytes(dir, "b\n");
  const std::string error = read_error(dir.write("bad.gz", gz));
  EXPECT_NE(error.find("after the zero padding"), std::string::npos) << error;
}

TEST(LineReader, RejectsGarbageAfterGzipMember) {
  TempDir dir;
  const std::string gz = gzip_bytes(dir, "a\n") + "not gzip\n";
  EXPECT_NE(read_error(dir.write("bad.gz", gz)).find("corrupt gzip"), std::string::npos);
}

TEST(LineReader, RejectsCorruptZstd) {
  TempDir dir;
  std::string zst = zstd_bytes("{\"text\": \"hello\"}\n");
  zst[4] = static_cast<char>(zst[4] | 0x08);  // a reserved bit of the frame header descriptor
  const std::string error = read_error(dir.write("bad.zst", zst));
  EXPECT_NE(error.find(dir / "bad.zst"), std::string::npos) << error;
  EXPECT_NE(error.find("corrupt zstd"), std::string::npos) << error;
}

TEST(LineReader, RejectsGzNameWithoutGzipBytes) {
  TempDir dir;
  dir.write("plain.jsonl.gz", "{\"text\": \"x\"}\n");
  EXPECT_THROW(LineReader(dir / "plain.jsonl.gz"), Error);
  const std::string error = read_error(dir / "plain.jsonl.gz");
  EXPECT_NE(error.find(dir / "plain.jsonl.gz"), std::string::npos) << error;
  EXPECT_NE(error.find("gzip magic"), std::string::npos) << error;
}

TEST(LineReader, RejectsZstNameWithoutZstdBytes) {
  TempDir dir;
  const std::string gz = gzip_bytes(dir, "x\n");  // gzip bytes are not zstd
  const std::string error = read_error(dir.write("a.jsonl.zst", gz));
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
  for (const char* name : {"c.jsonl", "a.jsonl", "b.jsonl", "notes.txt"}) dir.write(name, "x\n");
  EXPECT_EQ(expand_inputs({dir / "*.jsonl"}),
            (std::vector<std::string>{dir / "a.jsonl", dir / "b.jsonl", dir / "c.jsonl"}));
  EXPECT_EQ(expand_inputs({dir / "?.json[l]"}),
            (std::vector<std::string>{dir / "a.jsonl", dir / "b.jsonl", dir / "c.jsonl"}));
}

TEST(ExpandInputs, KeepsPlainPathsInGivenOrder) {
  TempDir dir;
  dir.write("a.jsonl", "x\n");
  dir.write("b.jsonl", "x\n");
  EXPECT_EQ(expand_inputs({dir / "b.jsonl", dir / "a.jsonl"}),
            (std::vector<std::string>{dir / "b.jsonl", dir / "a.jsonl"}));
}

TEST(ExpandInputs, ConcatenatesPatternsInOrder) {
  TempDir dir;
  for (const char* name : {"x1.jsonl", "x0.jsonl", "a.jsonl"}) dir.write(name, "x\n");
  EXPECT_EQ(expand_inputs({dir / "x*.jsonl", dir / "a.jsonl"}),
            (std::vector<std::string>{dir / "x0.jsonl", dir / "x1.jsonl", dir / "a.jsonl"}));
}

TEST(ExpandInputs, RejectsGlobMatchingNothingNamingPattern) {
  TempDir dir;
  dir.write("a.jsonl", "x\n");
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

// Megatron opens --input as given: an existing name is never a pattern, even when it holds
// [, ] or *; only a name that does not exist is expanded.
TEST(ExpandInputs, OpensExistingPathLiterallyEvenWithGlobCharacters) {
  TempDir dir;
  dir.write("data[1].jsonl", "x\n");
  dir.write("data1.jsonl", "y\n");
  dir.write("star*.jsonl", "z\n");
  dir.write("starA.jsonl", "w\n");
  EXPECT_EQ(expand_inputs({dir / "data[1].jsonl"}), (std::vector<std::string>{dir / "data[1].jsonl"}));
  EXPECT_EQ(expand_inputs({dir / "star*.jsonl"}), (std::vector<std::string>{dir / "star*.jsonl"}));
  fs::remove(dir / "data1.jsonl");
  EXPECT_EQ(expand_inputs({dir / "data[1].jsonl"}), (std::vector<std::string>{dir / "data[1].jsonl"}));
}

TEST(ExpandInputs, ExpandsMissingPathWithGlobCharactersAsPattern) {
  TempDir dir;
  dir.write("data1.jsonl", "y\n");
  EXPECT_EQ(expand_inputs({dir / "data[12].jsonl"}), (std::vector<std::string>{dir / "data1.jsonl"}));
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
  dir.write("a.jsonl", "x\n");
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
