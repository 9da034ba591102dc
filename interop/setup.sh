#!/usr/bin/env bash
# Installs and builds the external interop peers on a fresh Debian machine;
# idempotent (a second run only checks). The Go tests never install or build
# anything: they find these peers, and skip (listed by CI) where one is
# missing.
#
#   js-libp2p peers: `npm ci` in interop/js (the versions pinned in its
#     package-lock.json), when node and npm are on PATH.
#   rust-yamux peer: Debian's librust-*-dev crates (apt, as root), then
#     interop/rust/build.sh, offline, with the crates vendored in
#     ../shared/vendor/rust (or $BRAID_RUST_VENDOR). About two minutes on two
#     cores the first time; nothing when the binary is newer than its sources.
#
# Prints what it could not do. Exits non-zero only on a real failure (an
# install or build that was attempted and failed); a missing vendor dir,
# node, cargo or root is a skip.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
failed=0
note() { echo "interop/setup.sh: $*" >&2; }

# The Debian crates a tokio + rust-yamux program needs
# (shared/vendor/rust/README.md).
rust_debs=(librust-tokio-dev librust-tokio-util-dev librust-futures-dev
	librust-log-dev librust-parking-lot-dev librust-pin-project-dev
	librust-rand-dev librust-static-assertions-dev librust-socket2-dev)

js_peers() {
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		note "no node/npm: the js-libp2p tests will skip"
		return 0
	fi
	local js=$here/js
	# npm ci wipes and reinstalls node_modules: skip it when the tree was
	# installed from this very lock file (a stamp written after npm ci).
	local stamp=$js/node_modules/.braid-lock.sha256
	local want
	want=$(sha256sum "$js/package-lock.json" | cut -d' ' -f1)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		echo "js peers: node_modules up to date"
		return 0
	fi
	if (cd "$js" && npm ci --no-audit --no-fund --loglevel=error); then
		echo "$want" >"$stamp"
		echo "js peers: installed ($(cd "$js" && node -p 'Object.entries(require("./package.json").dependencies).map(([k, v]) => k + "@" + v).join(" ")'))"
	else
		note "npm ci in interop/js failed"
		failed=1
	fi
}

rust_debs_present() {
	[ -d /usr/share/cargo/registry/tokio-1.24.2 ] && [ -d /usr/share/cargo/registry/tokio-util-0.7.3 ] &&
		[ -d /usr/share/cargo/registry/socket2-0.4.4 ] && [ -d /usr/share/cargo/registry/futures-0.3.21 ]
}

rust_peer() {
	local bin=$here/rust/target/release/yamux-peer
	if ! command -v cargo >/dev/null 2>&1; then
		note "no cargo: the rust-yamux test will skip"
		return 0
	fi
	if ! rust_debs_present; then
		if [ "$(id -u)" != 0 ]; then
			note "not root, cannot install ${rust_debs[*]}: the rust-yamux test will skip"
			return 0
		fi
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${rust_debs[@]}" >/dev/null; }; then
			note "apt-get install of the Debian rust crates failed"
			failed=1
			return 0
		fi
	fi
	if [ -x "$bin" ] && [ -z "$(find "$here/rust/src" "$here/rust/Cargo.toml" "$here/rust/Cargo.lock" -newer "$bin" 2>/dev/null)" ]; then
		echo "rust peer: up to date ($bin)"
		return 0
	fi
	"$here/rust/build.sh"
	case $? in
	0) echo "rust peer: built ($bin)" ;;
	3) note "rust peer not built (see above): the rust-yamux test will skip" ;;
	*)
		note "rust peer build failed"
		failed=1
		;;
	esac
}

js_peers
rust_peer
exit $failed
