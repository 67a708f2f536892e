# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Turns this project's manual pages (man/*.7.md: a front-matter title, "# SECTION",
# "## Subsection", paragraphs, "* " bullets, "*term*" + ": definition" lists, fenced
# code blocks and "|" tables, with `code`, **bold**, *italic* and [text](link) inline)
# into man(7) roff with tbl(1) tables. POSIX awk (mawk and gawk).
#
#   awk -v date=YYYY-MM-DD -f man/md2man.awk man/fi_efa.7.md > fi_efa.7

function esc(s) {
	gsub(/\\/, "\\e", s)
	return s
}

# inline markup, after escaping
function inl(s,    out, i, c, j, k, lt, rt) {
	s = esc(s)
	# links: [text](target) -> text
	while (match(s, /\[[^]]*\]\([^)]*\)/)) {
		lt = substr(s, RSTART + 1)
		k = index(lt, "]")
		s = substr(s, 1, RSTART - 1) substr(lt, 1, k - 1) substr(s, RSTART + RLENGTH)
	}
	out = ""
	while (length(s) > 0) {
		c = substr(s, 1, 1)
		if (c == "`") {
			j = index(substr(s, 2), "`")
			if (j > 0) {
				out = out "\\fB" substr(s, 2, j - 1) "\\fR"
				s = substr(s, j + 2)
				continue
			}
		} else if (substr(s, 1, 2) == "**") {
			j = index(substr(s, 3), "**")
			if (j > 0) {
				out = out "\\fB" substr(s, 3, j - 1) "\\fR"
				s = substr(s, j + 4)
				continue
			}
		} else if (c == "*" && substr(s, 2, 1) != " " && substr(s, 2, 1) != "") {
			j = index(substr(s, 2), "*")
			if (j > 1) {
				out = out "\\fI" substr(s, 2, j - 1) "\\fR"
				s = substr(s, j + 2)
				continue
			}
		}
		out = out c
		s = substr(s, 2)
	}
	gsub(/\\\|/, "|", out) # \| in markdown tables
	return out
}

# a text line as roff: no leading dot or quote
function line(s) {
	if (s ~ /^[.']/)
		s = "\\&" s
	print s
}

function close_table() {
	if (!intable)
		return
	print ".TE"
	intable = 0
}

# the held-back first line of a paragraph, as a paragraph
function flush() {
	if (!has_held)
		return
	print ".PP"
	line(inl(held))
	held = ""; has_held = 0
}

function cells(s, arr,    n) {
	sub(/^[ \t]*\|/, "", s)
	sub(/\|[ \t]*$/, "", s)
	gsub(/\\\|/, "\001", s) # escaped bars are text
	n = split(s, arr, "|")
	for (i = 1; i <= n; i++) {
		gsub(/\001/, "\\|", arr[i])
		sub(/^[ \t]+/, "", arr[i])
		sub(/[ \t]+$/, "", arr[i])
	}
	return n
}

BEGIN {
	state = "start"; incode = 0; intable = 0; tblrow = 0
	print "'\\\" t"
}

state == "start" && /^---[ \t]*$/ { state = "front"; next }
state == "front" {
	if ($0 ~ /^---[ \t]*$/) { state = "body"; next }
	if ($0 ~ /^title:/) {
		t = $0; sub(/^title:[ \t]*/, "", t)
		name = t; sub(/\(.*/, "", name)
		sec = t; sub(/^[^(]*\(/, "", sec); sub(/\).*/, "", sec)
	}
	if ($0 ~ /^tagline:/) { tag = $0; sub(/^tagline:[ \t]*/, "", tag) }
	next
}
state == "start" { state = "body" }

state == "body" && !started {
	started = 1
	up = toupper(name)
	printf ".TH \"%s\" \"%s\" \"%s\" \"libfabric-efa\" \"%s\"\n", up, sec, date, tag
	print ".nh"
	print ".ad l"
}

# fenced code
/^```/ {
	flush()
	close_table()
	if (!incode) { print ".PP"; print ".RS 4"; print ".nf"; incode = 1 }
	else { print ".fi"; print ".RE"; incode = 0 }
	next
}
incode { line(esc($0)); next }

# tables
/^[ \t]*\|/ {
	flush()
	n = cells($0, c)
	if ($0 ~ /^[ \t]*\|[ \t:|-]+\|[ \t]*$/ && $0 ~ /---/)
		next # the alignment row
	if (!intable) {
		print ".TS"
		print "allbox tab(\002);"
		fmt = ""
		for (i = 1; i <= n; i++) fmt = fmt (i > 1 ? " " : "") (i == n ? "lx" : "l")
		print fmt "."
		intable = 1
		ncols = n
	}
	row = ""
	for (i = 1; i <= ncols; i++) {
		v = (i <= n) ? inl(c[i]) : ""
		row = row (i > 1 ? "\002" : "") "T{\n" v "\nT}"
	}
	print row
	next
}
intable { close_table() }

/^# / { flush(); t = substr($0, 3); print ".SH \"" inl(t) "\""; next }
/^## / { flush(); t = substr($0, 4); print ".SS \"" inl(t) "\""; next }
/^### / { flush(); t = substr($0, 5); print ".SS \"" inl(t) "\""; next }

/^[ \t]*$/ { flush(); pending_pp = 1; next }

# definition list: a one-line term (held back), then ": text" and indented lines
/^: / {
	print ".TP"
	if (held != "")
		line(inl(held))
	else
		print "\\&"
	held = ""; has_held = 0
	line(inl(substr($0, 3)))
	indef = 1
	pending_pp = 0
	next
}

# bullets
/^\* / {
	flush()
	print ".IP \\(bu 2"
	line(inl(substr($0, 3)))
	pending_pp = 0
	inbullet = 1
	next
}

# continuation lines of a bullet or definition (indented)
/^  +[^ ]/ && (inbullet || indef) && !pending_pp && !has_held {
	t = $0; sub(/^ +/, "", t)
	line(inl(t))
	next
}

# text: the first line after a break is held back (it may be a definition's term)
{
	t = $0
	sub(/^ +/, "", t)
	if (pending_pp || inbullet || indef) {
		flush()
		held = t; has_held = 1
		pending_pp = 0; inbullet = 0; indef = 0
		next
	}
	if (has_held) {
		flush()
	}
	line(inl(t))
}

END { flush(); close_table(); if (incode) print ".fi" }
