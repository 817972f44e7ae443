#!/usr/bin/perl
# The chaos suite's load on memcached (tests/chaos/chaos.sh): sets keys and reads them back,
# checking every value, until SIGTERM or SIGINT; then reads back every key it set and checks it.
#   mc_load.pl HOST PORT PREFIX MAXKEYS STATSFILE
# Keys are PREFIX:N, N from 0 to MAXKEYS-1, then again from 0 with the next generation: each
# value is a function of its key and generation, so the value each key must hold is always
# known. Each step sets one key and gets another one already set (chosen at random), so every
# worker thread of memcached serves sets and gets all the time. memcached is given a memory
# limit these keys never reach, and -M (an error instead of an eviction), so a key that is
# missing or wrong is lost data, never a cache's choice.
# Every 0.2 s the counters are written to STATSFILE (one line, key=value ...); a failure is
# written to stderr with its time, and the connection is opened again.
# The last line of STATSFILE, after the stop, has final=1 and the sweep's figures.
use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time sleep);

my ($host, $port, $prefix, $maxkeys, $statsfile) = @ARGV;
die "usage: mc_load.pl HOST PORT PREFIX MAXKEYS STATSFILE\n" unless defined $statsfile;
my $stop = 0;
$SIG{TERM} = $SIG{INT} = sub { $stop = 1 };
$SIG{PIPE} = 'IGNORE';

my %n = (sets => 0, gets => 0, errors => 0, mismatches => 0, misses => 0, reconnects => 0,
         gen => 0, next => 0, swept => 0, swept_bad => 0, unchecked => 0, final => 0);
my $timeout = 10;   # seconds a reply may take (a traced server is slower, never this slow)

sub say_err { printf STDERR "%.3f mc_load %s: %s\n", time, $prefix, $_[0]; }

sub value {
    my ($k, $g) = @_;
    return "v$g-$prefix-$k-" . ('x' x (($k * 7 + $g) % 61));
}
# The value key K must hold now, or undef when it was never set.
sub expected {
    my $k = shift;
    return value($k, $n{gen}) if $k < $n{next};
    return value($k, $n{gen} - 1) if $n{gen} > 0;
    return undef;
}

my ($sock, $sel, $buf);
# Tries until it connects (or the stop comes), or at most ATTEMPTS times when given.
sub connect_server {
    my $attempts = shift;
    while (1) {
        $sock = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => 'tcp', Timeout => $timeout);
        if ($sock) {
            $sock->autoflush(1);
            setsockopt($sock, 6, 1, 1);   # TCP_NODELAY
            $sel = IO::Select->new($sock);
            $buf = '';
            return 1;
        }
        $n{errors}++;
        say_err("connect: $!");
        return 0 if $stop || (defined $attempts && --$attempts <= 0);
        sleep 0.2;
    }
}
sub reconnect {
    close $sock if $sock;
    $n{reconnects}++;
    connect_server(@_);
}
sub send_all {
    my $data = shift;
    while (length $data) {
        my $w = syswrite($sock, $data);
        next if !defined $w && $!{EINTR};
        return 0 unless defined $w && $w > 0;
        substr($data, 0, $w) = '';
    }
    return 1;
}
# Waits for data to read, $timeout seconds at most (a signal, the stop's, does not end the wait).
sub wait_readable {
    my $end = time + $timeout;
    while (1) {
        return 1 if $sel->can_read($end - time > 0 ? $end - time : 0);
        return 0 unless $!{EINTR} && time < $end;
    }
}
sub fill {
    return 0 unless wait_readable();
    my $r;
    do { $r = sysread($sock, $buf, 65536, length $buf); } while (!defined $r && $!{EINTR});
    return $r ? 1 : 0;
}
# One line (without \r\n), or undef on EOF, error or timeout.
sub read_line {
    while (1) {
        my $i = index($buf, "\r\n");
        if ($i >= 0) { my $l = substr($buf, 0, $i); substr($buf, 0, $i + 2) = ''; return $l; }
        return undef unless fill();
    }
}
sub read_bytes {
    my $len = shift;
    while (length($buf) < $len + 2) {
        return undef unless fill();
    }
    my $d = substr($buf, 0, $len); substr($buf, 0, $len + 2) = '';
    return $d;
}

# set: 1 stored, 0 connection failed (counted, reconnected), dies never.
sub set_key {
    my ($k, $v) = @_;
    my $ok = send_all("set $prefix:$k 0 0 " . length($v) . "\r\n$v\r\n");
    my $l = $ok ? read_line() : undef;
    if (defined $l && $l eq 'STORED') { $n{sets}++; return 1; }
    $n{errors}++;
    say_err("set $prefix:$k: " . (defined $l ? "reply '$l'" : "no reply ($!)"));
    reconnect();
    return 0;
}
# get of several keys at once: a hash of what came back, or undef on a connection failure.
sub get_keys {
    my @ks = @_;
    return undef unless send_all("get " . join(' ', map { "$prefix:$_" } @ks) . "\r\n");
    my %got;
    while (1) {
        my $l = read_line();
        return undef unless defined $l;
        return \%got if $l eq 'END';
        if ($l =~ /^VALUE \Q$prefix\E:(\d+) \d+ (\d+)$/) {
            my $d = read_bytes($2);
            return undef unless defined $d;
            $got{$1} = $d;
        } else {
            say_err("get: unexpected reply '$l'");
            return undef;
        }
    }
}
sub check_key {
    my ($k, $got, $what) = @_;
    my $want = expected($k);
    return 1 unless defined $want;
    if (!defined $got) {
        $n{misses}++;
        say_err("$what $prefix:$k: missing (want '$want')");
        return 0;
    }
    if ($got ne $want) {
        $n{mismatches}++;
        say_err("$what $prefix:$k: got '$got', want '$want'");
        return 0;
    }
    return 1;
}

sub write_stats {
    my $line = join(' ', map { "$_=$n{$_}" } sort keys %n) . sprintf(" time=%.3f\n", time);
    if (open(my $f, '>', "$statsfile.tmp")) { print $f $line; close $f; rename "$statsfile.tmp", $statsfile; }
}

connect_server() or exit 1;
my $last = 0;
while (!$stop) {
    my $k = $n{next};
    next unless set_key($k, value($k, $n{gen}));
    $n{next}++;
    if ($n{next} >= $maxkeys) { $n{next} = 0; $n{gen}++; }
    # A key set before, at random (the one just set when it is the only one).
    my $have = $n{gen} > 0 ? $maxkeys : $n{next};
    my $j = int(rand($have));
    my $got = get_keys($j);
    if (!defined $got) {
        $n{errors}++;
        say_err("get $prefix:$j: no reply ($!)");
        reconnect();
    } else {
        $n{gets}++;
        check_key($j, $got->{$j}, 'get');
    }
    if (time - $last >= 0.2) { write_stats(); $last = time; }
}

# The sweep: every key that was ever set, read back in batches of 100 (a batch that gets no
# answer is tried again, 5 failures at most; the keys not read back are counted as unchecked).
$stop = 0;
my $have = $n{gen} > 0 ? $maxkeys : $n{next};
my $failures = 0;
$n{unchecked} = 0;
for (my $k = 0; $k < $have; ) {
    my @ks = grep { $_ < $have } ($k .. $k + 99);
    my $got = $sock ? get_keys(@ks) : undef;
    if (!defined $got) {
        $n{errors}++;
        say_err("sweep: get from $prefix:$k: no reply ($!)");
        if (++$failures > 5 || !reconnect(10)) { $n{unchecked} = $have - $k; last; }
        next;
    }
    for my $j (@ks) { $n{swept}++; $n{swept_bad}++ unless check_key($j, $got->{$j}, 'sweep'); }
    $k += 100;
}
$n{final} = 1;
write_stats();
exit 0;
