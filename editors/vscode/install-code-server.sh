#!/bin/sh
# Installs code-server (VS Code in a browser) from the npm registry for the editor tests
# (tests/test_vscode_editor.py), with node 20 and nothing fetched from outside the registry.
#
# code-server 4.100.3 is the newest release for node 20 (4.103 and later need node 22). Its
# postinstall would download prebuilt binaries and ripgrep from GitHub, so the packages are
# installed with --ignore-scripts, then its native modules are built here from their
# sources with node-gyp (needs g++, make, python3 and node's headers: NODEDIR, default
# /usr), and the postinstall's links are made by hand. Not built: kerberos (proxy
# authentication; needs the krb5 headers) and ripgrep (Quick Open's file search).
#
# Usage: sh install-code-server.sh DEST   then   export XLALINT_CODE_SERVER=DEST/package/out/node/entry.js
set -eu
dest="$1"
version=4.100.3
nodedir="${NODEDIR:-/usr}"
gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
mkdir -p "$dest"
cd "$dest"
npm pack "code-server@$version"
tar xzf "code-server-$version.tgz"
cd package
npm install --omit=dev --ignore-scripts --no-audit --no-fund
(cd lib/vscode && npm install --omit=dev --ignore-scripts --no-audit --no-fund)
(cd lib/vscode/extensions && npm install --omit=dev --ignore-scripts --no-audit --no-fund)
for module in @vscode/spdlog @vscode/deviceid native-watchdog node-pty; do
  (cd "lib/vscode/node_modules/$module" && node "$gyp" rebuild --nodedir="$nodedir")
done
# argon2 (password hashing) is found by node-pre-gyp under lib/binding/napi-v3.
(cd node_modules/argon2 && node "$gyp" rebuild --nodedir="$nodedir" --module_name=argon2 \
  --module_path="$PWD/lib/binding/napi-v3" --napi_build_version=3)
# What postinstall.sh links.
ln -sfn node_modules lib/vscode/node_modules.asar
ln -sfn code-linux.sh lib/vscode/bin/remote-cli/code-server
ln -sfn browser-linux.sh lib/vscode/bin/helpers/browser.sh
node out/node/entry.js --version
