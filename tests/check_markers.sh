#!/usr/bin/env bash
# Every public function is declared and defined under the same `// >>name` marker,
# and every marker is listed in its header's top comment. Prints one ok/not ok line
# per header.
set -u
cd "$(dirname "$0")/.."
rc=0
for h in vescale_mesh.h vescale_ddp.h vescale_pipe.h vescale_ckpt.h; do
    out=$(awk -v H="$h" '
        /IMPLEMENTATION[ \t]*\*\// && !impl_seen { }
        /^#define VESCALE_[A-Z]*_IMPLEMENTED$/ { impl = 1 }
        /^\/\/ >>[a-z-]+/ { m = $2; sub(/^>>/, "", m); if (impl) defmk[m] = 1; else declmk[m] = 1; cur = m }
        /^   +\/\/ >>[a-z-]+/ && !impl { listed[substr($2, 3)] = 1 }
        /^VS_API / {
            line = $0
            if (match(line, /vs_[a-z0-9_]+\(/)) {
                name = substr(line, RSTART, RLENGTH - 1)
                if (impl) { if (!(name in def)) def[name] = cur }
                else if (!(name in decl)) decl[name] = cur
            }
        }
        END {
            bad = 0
            for (f in def) if ((f in decl) && decl[f] != def[f]) { printf "    %s: declared under >>%s, defined under >>%s\n", f, decl[f], def[f]; bad++ }
            for (m in declmk) if (!(m in listed)) { printf "    marker >>%s is not listed in the top comment\n", m; bad++ }
            for (m in defmk) if (!(m in listed) && m != "end-of-implementation") { printf "    marker >>%s is not listed in the top comment\n", m; bad++ }
            exit bad > 0
        }' "$h")
    if [ $? -eq 0 ]; then echo "ok markers/$h"; else echo "not ok markers/$h"; echo "$out"; rc=1; fi
done
exit $rc
