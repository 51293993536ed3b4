# tests/vs_private.awk - a header's text with the bodies of its public (VS_API)
# functions removed: each definition becomes its declaration. make writes
# $(B)/priv/<header> from each header; tests/vs_private.h includes them, so a test
# that reads private parts (a handle's struct, a _vs_* helper, a _VS_* macro)
# still sees every type, macro and private helper, while the public functions,
# and what only they reach, come from $(B)/impl/<config>.o. Relies on the
# headers' layout (STYLE.md): a definition starts at column 0 with VS_API, its
# body is "{" ... "}" at column 0, or the whole function is one line. Anything
# else stops the build (exit 1), so a change of layout is not silently misread.
# The one piece of the library's state outside a handle is each thread's error
# (vescale_mesh.h: _vs_err_tls). The test's own copies of the private helpers must
# report into the object's, which vs_last_error() shows: it returns that state's
# message, so the state is found from it. (Were it ever a copy, the tests that check
# a helper's message would fail, not pass.)
/^_VS_PRIVATE _vs_errstate\* _vs_err_tls\(void\)$/ {
    print
    print "{"
    print "    return (_vs_errstate*)(void*)((char*)(uintptr_t)vs_last_error() - offsetof(_vs_errstate, msg));"
    print "}"
    errtls = 1
    inbody = 1
    getline # its "{"
    next
}
/^VS_API/ && !insig && !inbody {
    sig = ""
    insig = 1
}
insig {
    line = $0
    if (line ~ /^\{$/) { # a body in the layout of the headers: skipped to its "}"
        print sig ";"
        insig = 0
        inbody = 1
        next
    }
    if (index(line, "{")) { # one line: declaration and body
        if (line !~ /\}[[:space:]]*(\/\/.*)?$/) {
            print FILENAME ":" NR ": vs_private.awk: a body opened but not closed on its line" > "/dev/stderr"
            bad = 1
            exit 1
        }
        sig = sig (sig == "" ? "" : "\n") substr(line, 1, index(line, "{") - 1)
        sub(/[[:space:]]+$/, "", sig)
        print sig ";"
        insig = 0
        next
    }
    sig = sig (sig == "" ? "" : "\n") line
    if (line ~ /;[[:space:]]*(\/\/.*)?$/) { # a declaration: as it is
        print sig
        insig = 0
    }
    next
}
inbody {
    if ($0 ~ /^\}/) {
        if ($0 !~ /^\}[[:space:]]*(\/\/.*)?$/) {
            print FILENAME ":" NR ": vs_private.awk: a body that ends with more than its brace" > "/dev/stderr"
            bad = 1
            exit 1
        }
        inbody = 0
    }
    next
}
{ print }
END {
    if (!bad && FILENAME ~ /vescale_mesh\.h$/ && !errtls) {
        print FILENAME ": vs_private.awk: no _vs_err_tls (the thread's error state) to share" > "/dev/stderr"
        exit 1
    }
    if (!bad && (insig || inbody)) {
        print FILENAME ": vs_private.awk: the file ended inside a public function" > "/dev/stderr"
        exit 1
    }
}
