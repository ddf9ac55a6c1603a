#!/bin/sh
# Every relative link in the repository's Markdown files resolves: the file
# or directory exists, and a #fragment names a heading of the target (or of
# the same file), slugged the way GitHub does.  One check per Markdown file;
# prints "docs: N passed, N failed" (tests/run-all.sh counts it).
#   sh tests/docs/check-links.sh [FILE.md...]   (default: every tracked *.md)
set -u
cd "$(dirname "$0")/../.."
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP docs: python3 not found"
    echo "docs: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
if [ $# -eq 0 ]; then
    set -- $(git ls-files '*.md' 2>/dev/null || find . -name '*.md' -not -path './build*' | sed 's|^\./||')
fi
exec python3 - "$@" <<'EOF'
import os, re, sys

link_re = re.compile(r'!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
head_re = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')

def slug(text):
    text = re.sub(r'`', '', text.strip().lower())
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)   # a link in a heading: its text
    text = re.sub(r'[^\w\- ]', '', text)                     # GitHub keeps letters, digits, _ and -
    return text.replace(' ', '-')

def lines_outside_code(path):
    fence = None
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            s = line.lstrip()
            m = re.match(r'(```+|~~~+)', s)
            if m:
                if fence is None:
                    fence = m.group(1)[0] * 3
                elif s.startswith(fence):
                    fence = None
                continue
            if fence is None:
                yield n, line

anchors_cache = {}
def anchors(path):
    if path not in anchors_cache:
        seen, out = {}, set()
        for _, line in lines_outside_code(path):
            m = head_re.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else '%s-%d' % (s, k))
        for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', open(path, encoding='utf-8').read()):
            out.add(m.group(1))
        anchors_cache[path] = out
    return anchors_cache[path]

passed = failed = 0
for md in sys.argv[1:]:
    if not os.path.isfile(md):
        continue
    bad = []
    for n, line in lines_outside_code(md):
        for m in link_re.finditer(re.sub(r'`[^`]*`', '', line)):
            target = m.group(1)
            if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):   # http:, https:, mailto: ...
                continue
            path, _, frag = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            if not os.path.exists(dest):
                bad.append('%s:%d: %s: no such file or directory' % (md, n, target))
                continue
            if frag and dest.endswith('.md') and os.path.isfile(dest) and frag not in anchors(dest):
                bad.append('%s:%d: %s: no heading "#%s" in %s' % (md, n, target, frag, dest))
    if bad:
        failed += 1
        for b in bad:
            print('FAIL ' + b)
    else:
        passed += 1
print('docs: %d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
EOF
