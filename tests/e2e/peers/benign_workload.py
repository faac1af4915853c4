#!/usr/bin/env python3
"""A synthetic benign agent workload for the label budget (issue 26), reproducible from a seed.

usage: benign_workload.py [--seed N] [--hours H] (--queries | --allowlist | --summary)

One hour of what a coding agent's sandbox asks, modelled on the workload the issue measured
(git, npm, pip, cloud APIs, CDNs, error reporting: ~1,120 queries, ~109 distinct names, at most
~45 new names in one minute, leftmost labels up to 40 bytes): a git clone and fetches, a pip
install, an npm install whose burst of new CDN names (prebuilt binaries from CloudFront, S3
buckets, Fastly) is the worst minute, cloud API calls to regional endpoints, error reports to
per-project ingest hosts, telemetry. Names recur (A, AAAA, sometimes HTTPS) the way resolvers
without a shared cache ask them again. Each further hour asks the same hosts again and repeats
the pattern with fresh hashes for the CDN objects and buckets (new packages, new releases), so
every hour brings new names too.

--queries   one line per query, in time order: SECONDS QTYPE NAME (seconds from the start)
--allowlist the allowlist the workload needs: its wildcards and exact names, one a line
--summary   what the workload holds, key=value: queries, names, max_new_per_minute,
            max_leftmost, p95_leftmost, then per wildcard zone the new label bytes in its busiest
            hour, billed as moatd bills them (the wire bytes of the labels below the zone of
            each name not asked in the hour before): zone.ZONE=BYTES, max_zone_bytes, and
            all_zones_bytes (their sum: the bill if every wildcard were one zone)
The same seed gives the same output, byte for byte."""
import random
import string
import sys

WILDCARDS = ["github.com", "githubusercontent.com", "cloudfront.net", "s3.amazonaws.com",
             "amazonaws.com", "fastly.net", "ingest.us.sentry.io", "googleapis.com", "gstatic.com",
             "datadoghq.com", "npmjs.org", "pythonhosted.org", "docker.io", "docker.com",
             "azureedge.net", "debian.org", "jsdelivr.net", "anthropic.com", "huggingface.co",
             "crates.io", "golang.org"]
EXACT = ["github.com", "pypi.org", "nodejs.org", "unpkg.com", "sentry.io", "ghcr.io",
         "huggingface.co"]


def hexs(rng, n):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def word(rng, n):
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))


def hour_names(rng, hour):
    """(start second, name) of every name first asked in this hour, in no particular order."""
    out = []
    base = [("github.com", 20), ("api.github.com", 22), ("codeload.github.com", 25),
            ("objects.githubusercontent.com", 26), ("raw.githubusercontent.com", 140),
            ("avatars.githubusercontent.com", 610), ("pkg-containers.githubusercontent.com", 1900),
            ("release-assets.githubusercontent.com", 930), ("ghcr.io", 1890),
            ("pypi.org", 300), ("files.pythonhosted.org", 302),
            ("registry.npmjs.org", 900), ("nodejs.org", 905), ("cdn.jsdelivr.net", 915),
            ("unpkg.com", 918), ("deb.debian.org", 1200), ("security.debian.org", 1201),
            ("sts.amazonaws.com", 60), ("sts.us-east-1.amazonaws.com", 61),
            ("bedrock-runtime.us-east-1.amazonaws.com", 62),
            ("bedrock-runtime.us-west-2.amazonaws.com", 2400),
            ("s3.us-west-2.amazonaws.com", 1500), ("ecr.us-east-1.amazonaws.com", 1880),
            ("api.ecr.us-east-1.amazonaws.com", 1881), ("logs.us-east-1.amazonaws.com", 65),
            ("oauth2.googleapis.com", 700), ("storage.googleapis.com", 701),
            ("www.googleapis.com", 702), ("generativelanguage.googleapis.com", 2600),
            ("fonts.gstatic.com", 705), ("www.gstatic.com", 706), ("sentry.io", 400),
            ("http-intake.logs.datadoghq.com", 80), ("api.datadoghq.com", 81),
            ("registry-1.docker.io", 1885), ("auth.docker.io", 1886),
            ("production.cloudflare.docker.com", 1887), ("api.anthropic.com", 10),
            ("statsig.anthropic.com", 11), ("huggingface.co", 2000),
            ("cdn-lfs.huggingface.co", 2001), ("cdn-lfs-us-1.huggingface.co", 2002),
            ("index.crates.io", 2700), ("static.crates.io", 2701), ("proxy.golang.org", 3000),
            ("sum.golang.org", 3001)]
    out += base  # the same hosts every hour
    # error reporting: a few projects' ingest hosts (o<org>.ingest.us.sentry.io)
    for i in range(6):
        out.append(("o%d.ingest.us.sentry.io" % rng.randrange(100000, 9999999),
                    rng.randrange(300, 3500)))
    # the npm install burst: 45 new names within one minute, starting at 15:00
    t0 = 900
    for i in range(18):  # prebuilt binaries behind CloudFront: d<13>.cloudfront.net
        out.append(("d%s.cloudfront.net" % word(rng, 13), t0 + rng.uniform(2, 58)))
    for i in range(12):  # release buckets: long virtual-hosted S3 names (leftmost 30-40 bytes)
        # (a suffix of 8 hex digits would be read as an embedded IPv4 address by the name
        # check, which denies the ~15% that fall in blocked ranges: not this test's subject)
        b = "%s-%s" % (rng.choice(["github-production-release-asset", "prebuilt-binaries-mirror",
                                   "npm-package-artifacts-cache", "electron-mirror-cache-eu"]),
                       word(rng, 8))
        out.append(("%s.s3.amazonaws.com" % b[:rng.randrange(34, 41)], t0 + rng.uniform(2, 58)))
    for i in range(5):  # Fastly shields
        out.append(("%s.global.ssl.fastly.net" % word(rng, rng.randrange(6, 12)),
                    t0 + rng.uniform(2, 58)))
    for i in range(5):  # Azure CDN mirrors (playwright, electron builds)
        out.append(("%s.azureedge.net" % word(rng, rng.randrange(10, 20)), t0 + rng.uniform(2, 58)))
    # later in the hour: a few more objects fetched
    for i in range(10):
        out.append(("d%s.cloudfront.net" % word(rng, 13), rng.uniform(1000, 3500)))
    for i in range(6):  # the agent's own artifact buckets, per task
        out.append(("%s.s3.us-west-2.amazonaws.com" % ("agent-task-artifacts-" + hexs(rng, 16)),
                    rng.uniform(1500, 3500)))
    return out


def queries(seed, hours):
    rng = random.Random(seed)
    out = []
    for h in range(hours):
        for name, start in hour_names(rng, h):
            start += h * 3600
            # asked at first sight (A and AAAA, sometimes HTTPS), then again now and then
            n = 1 + int(rng.expovariate(1 / 7.5))
            t = start
            for k in range(n):
                out.append((t, "A", name))
                out.append((t + 0.001, "AAAA", name))
                if rng.random() < 0.3:
                    out.append((t + 0.002, "HTTPS", name))
                t += rng.expovariate(1 / 450)
                if t >= (h + 1) * 3600:
                    break
    out.sort()
    return out


def zone_of(name):
    """The nearest wildcard of the allowlist that covers name (moatd's rule), or None."""
    labels = name.split(".")
    for i in range(1, len(labels)):
        suffix = ".".join(labels[i:])
        if suffix in WILDCARDS:
            return suffix
    return None


def summary(qs):
    names, first = set(), {}
    for t, _, n in qs:
        if n not in first:
            first[n] = t
        names.add(n)
    per_min = {}
    for n, t in first.items():
        per_min[int(t // 60)] = per_min.get(int(t // 60), 0) + 1
    left = sorted(len(n.split(".")[0]) for n in names)
    # bill like moatd: a name not asked in the hour before costs its labels below the zone
    last, billed = {}, {}
    for t, _, n in qs:
        z = zone_of(n)
        if z and (n not in last or t - last[n] > 3600):
            billed.setdefault(z, []).append((t, len(n) - len(z)))  # "a.b." = wire bytes
        last[n] = t
    zones = {}
    for z, bills in billed.items():
        best, j, s = 0, 0, 0
        for i, (t, b) in enumerate(bills):
            s += b
            while bills[j][0] <= t - 3600:
                s -= bills[j][1]
                j += 1
            best = max(best, s)
        zones[z] = best
    print("queries=%d names=%d max_new_per_minute=%d max_leftmost=%d p95_leftmost=%d" %
          (len(qs), len(names), max(per_min.values()), left[-1], left[int(0.95 * (len(left) - 1))]))
    for z in sorted(zones):
        print("zone.%s=%d" % (z, zones[z]))
    print("max_zone_bytes=%d" % max(zones.values()))
    # the pessimistic figure: every zone's bytes as if they were one zone's
    print("all_zones_bytes=%d" % sum(zones.values()))


def main():
    args = sys.argv[1:]
    seed, hours, mode = 1, 1, None
    while args:
        a = args.pop(0)
        if a == "--seed":
            seed = int(args.pop(0))
        elif a == "--hours":
            hours = int(args.pop(0))
        elif a in ("--queries", "--allowlist", "--summary"):
            mode = a
        else:
            sys.exit(__doc__)
    if mode is None:
        sys.exit(__doc__)
    if mode == "--allowlist":
        for z in WILDCARDS:
            print("*." + z)
        for n in EXACT:
            print(n)
        return
    qs = queries(seed, hours)
    if mode == "--summary":
        summary(qs)
        return
    for t, qt, n in qs:
        print("%.3f %s %s" % (t, qt, n))


main()
