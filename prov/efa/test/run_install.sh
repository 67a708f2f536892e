#!/bin/sh
# make install puts libefa-fi.so and libefasim.so in $(libdir)/libfabric, and the
# installed provider finds the installed device library beside itself.
set -eu
top="${abs_top_builddir:-$(cd "$(dirname "$0")/../../.." && pwd)}"
command -v fi_info >/dev/null 2>&1 || { echo "SKIP: fi_info not installed"; exit 77; }
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
MAKEFLAGS= make -s -C "$top" install DESTDIR="$dest" >/dev/null
provdir=$(dirname "$(find "$dest" -name libefa-fi.so | head -1)")
case "$provdir" in
*/libfabric) ;;
*) echo "FAIL: libefa-fi.so not installed in a libfabric/ directory: $provdir"; exit 1 ;;
esac
libdir=${provdir%/libfabric}
libdir=${libdir#"$dest"}
for f in libefa-fi.so libefasim.so; do
	test -f "$provdir/$f" || { echo "FAIL: $provdir/$f not installed"; exit 1; }
done
for m in fi_efa.7.md efasim.7.md; do
	found=$(find "$dest" -name "$m" | head -1)
	test -n "$found" || { echo "FAIL: documentation $m not installed"; exit 1; }
done
# The manual pages, as man(7) roff in man7/, which man(1) renders.
for m in fi_efa efasim; do
	page=$(find "$dest" -path "*/man7/$m.7" | head -1)
	test -n "$page" || { echo "FAIL: $m.7 not installed in a man7/ directory"; exit 1; }
	head -3 "$page" | grep -q "^\.TH \"$(echo $m | tr a-z A-Z)\" \"7\"" ||
		{ echo "FAIL: $page has no .TH line for $m(7)"; exit 1; }
	if command -v groff >/dev/null 2>&1; then
		text=$(groff -t -man -Tutf8 -P-cbou -wmac "$page" 2>"$dest/groff.err" || true)
		if [ -s "$dest/groff.err" ] && grep -q "macro" "$dest/groff.err"; then
			echo "FAIL: groff: $(head -3 "$dest/groff.err")"; exit 1
		fi
		printf '%s\n' "$text" | grep -q "^NAME" && printf '%s\n' "$text" | grep -q "^SEE ALSO" ||
			{ echo "FAIL: $m(7) does not render with NAME .. SEE ALSO"; exit 1; }
	fi
	echo "ok: $m(7) installed as ${page#"$dest"}"
done
out=$(FI_PROVIDER_PATH="@$provdir" FI_PROVIDER=efa FI_LOG_LEVEL=info fi_info 2>&1 || true)
printf '%s\n' "$out" | grep -a -q "software device, $provdir/libefasim.so" || {
	echo "FAIL: the installed provider did not use the installed libefasim.so"
	printf '%s\n' "$out" | grep -a ":efa:" | tail -5
	exit 1
}
echo "ok: installed into $libdir/libfabric and found the device library beside the provider"
