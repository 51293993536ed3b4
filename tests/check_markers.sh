#!/usr/bin/env bash
# Layout of each header: every public function is declared (in the header's public
# part) and defined under the same `// >>name` marker; every marker is listed in
# the header's top comment; each marker is opened once per part (one contiguous
# block), and the implementation's markers come in the order of the declarations'.
# Prints one ok/not ok line per header. Arguments: other files to check instead
# (compile_check.sh checks the checker on a header with a marker opened twice).
set -u
files="$*"
cd "$(dirname "$0")/.."
rc=0
for h in ${files:-vescale.h vescale_mesh.h vescale_ddp.h vescale_pipe.h vescale_ckpt.h}; do
    out=$(awk -v H="$h" '
        /^#define VESCALE_[A-Z]*_IMPLEMENTED$/ { impl = 1 }
        /^\/\/ >>[a-z-]+/ {
            m = $2; sub(/^>>/, "", m)
            if ($3 == "end") next # (a block'"'"'s closing line)
            if (impl) {
                if (m in defmk) { printf "    marker >>%s opened twice in the implementation (lines %d and %d)\n", m, defmk[m], NR; bad++ }
                else { defmk[m] = NR; deforder[++ndef] = m }
            } else {
                if (m in declmk) { printf "    marker >>%s opened twice in the declarations (lines %d and %d)\n", m, declmk[m], NR; bad++ }
                else { declmk[m] = NR; declorder[++ndecl] = m }
            }
            cur = m
        }
        /^   +\/\/ >>[a-z-]+/ && !impl { listed[substr($2, 3)] = 1 }
        /^VS_API / {
            line = $0
            if (match(line, /vs_[a-z0-9_]+\(/)) {
                name = substr(line, RSTART, RLENGTH - 1)
                if (impl) { if (!(name in def)) { def[name] = cur; defline[name] = NR } }
                else if (!(name in decl)) decl[name] = cur
            }
        }
        END {
            for (f in def) {
                if (!(f in decl)) { printf "    %s (line %d) is defined but not declared in the public part\n", f, defline[f]; bad++ }
                else if (decl[f] != def[f]) { printf "    %s: declared under >>%s, defined under >>%s\n", f, decl[f], def[f]; bad++ }
            }
            for (m in declmk) if (!(m in listed)) { printf "    marker >>%s is not listed in the top comment\n", m; bad++ }
            for (m in defmk) if (!(m in listed) && m != "end-of-implementation") { printf "    marker >>%s is not listed in the top comment\n", m; bad++ }
            k = 0 # the implementation'"'"'s markers in the declarations'"'"' order (markers with no declarations aside)
            for (i = 1; i <= ndef; i++) {
                m = deforder[i]
                if (!(m in declmk)) continue
                while (k < ndecl && declorder[k + 1] != m) k++
                if (k >= ndecl) { printf "    marker >>%s (line %d) is out of the declarations'"'"' order\n", m, defmk[m]; bad++; break }
                k++
            }
            exit bad > 0
        }' "$h")
    if [ $? -eq 0 ]; then echo "ok markers/$h"; else echo "not ok markers/$h"; echo "$out"; rc=1; fi
done
exit $rc
