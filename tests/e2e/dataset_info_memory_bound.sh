#!/usr/bin/env bash
# Memory that does not grow with the document count: dataset_info summarizes a 4M-document
# dataset under a 40 MB limit on private memory (ulimit -d), since the .idx arrays are mapped,
# not copied (copies alone would take 80 MB), and the length percentiles come from counts.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require perl

# make_dataset PREFIX N EXPR: N single-sequence documents of EXPR tokens (a Perl expression of
# $i), uint16 token id 7, written as Megatron's preprocess_data writes them.
make_dataset() {
  perl -e '
    use strict; my ($prefix, $n, $expr) = @ARGV;
    my $len = eval "sub { my \$i = shift; $expr }" or die $@;
    open(my $idx, ">:raw", "$prefix.idx") or die; open(my $bin, ">:raw", "$prefix.bin") or die;
    print $idx "MMIDIDX\0\0", pack("Q<", 1), pack("C", 8), pack("Q<Q<", $n, $n + 1);
    my $chunk = 100000;
    for (my $s = 0; $s < $n; $s += $chunk) {
      my $e = $s + $chunk < $n ? $s + $chunk : $n;
      print $idx pack("l<*", map { $len->($_) } $s .. $e - 1);
    }
    my $ptr = 0;
    for (my $s = 0; $s < $n; $s += $chunk) {
      my $e = $s + $chunk < $n ? $s + $chunk : $n;
      my @p; for my $i ($s .. $e - 1) { push @p, $ptr; $ptr += 2 * $len->($i); }
      print $idx pack("q<*", @p);
    }
    for (my $s = 0; $s <= $n; $s += $chunk) {
      my $e = $s + $chunk < $n + 1 ? $s + $chunk : $n + 1;
      print $idx pack("q<*", $s .. $e - 1);
    }
    print $bin pack("v", 7) x ($ptr / 2);
  ' "$@"
}

step "dataset_info on 4,000,000 documents within 40 MB of private memory"
make_dataset many 4000000 '($i % 7) + 1'
run_capture bash -c 'ulimit -d 40000 && exec "$0" many' "$INFO"
if [[ $RC -ne 0 ]]; then
  show "$WORK/err.txt" stderr
  fail "dataset_info needs more than 40 MB of private memory for 4M documents (exit $RC)"
fi
ok "exit 0 under ulimit -d 40000"
assert_line out.txt "documents        4000000"
assert_line out.txt "tokens           15999994"
assert_line out.txt "document tokens  min 1  mean 4.0  p50 4  p90 7  p99 7  max 7  empty 0"

step "percentiles of documents longer than 65535 tokens (kept apart from the counts)"
make_dataset long 100 '$i < 50 ? $i : 65536 + $i'
assert_succeeds "$INFO" long
# Sorted: 0..49, then 65586..65635; nearest rank 50, 90 and 99 of 100.
assert_line out.txt "document tokens  min 0  mean 32817.5  p50 49  p90 65625  p99 65634  max 65635  empty 1"
