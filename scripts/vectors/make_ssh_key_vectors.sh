#!/usr/bin/env bash
# Makes the HostsTests fixtures: OpenSSH private keys of every type, plain and protected by a
# passphrase (bcrypt-pbkdf + aes256-ctr, ssh-keygen's default), with their fingerprints; a
# known_hosts file hashed by ssh-keygen -H; and bcrypt-pbkdf known answers from PyPI's `bcrypt`
# (an independent implementation). Our own generated data; re-run to regenerate.
#   scripts/vectors/make_ssh_key_vectors.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=Tests/HostsTests/Fixtures/ssh
rm -rf "$out"; mkdir -p "$out"
passphrase='correct horse battery staple'
echo "$passphrase" > "$out/passphrase.txt"
for spec in ed25519: ecdsa:256 ecdsa:384 ecdsa:521 rsa:2048; do
  type=${spec%%:*}; bits=${spec#*:}
  name=$type${bits:+-$bits}
  args=(-q -t "$type" -C "farcast-test-$name")
  [ -n "$bits" ] && args+=(-b "$bits")
  ssh-keygen "${args[@]}" -N '' -f "$out/$name"
  # -a 4: few rounds keep the unit tests fast; the KDF is the same at any count.
  ssh-keygen "${args[@]}" -N "$passphrase" -a 4 -f "$out/$name-encrypted"
  for f in "$name" "$name-encrypted"; do
    ssh-keygen -l -E sha256 -f "$out/$f.pub" | awk '{print $2}' > "$out/$f.fingerprint"
  done
done
# known_hosts: plain, wildcard, port, negation, hashed (by ssh-keygen -H), @revoked, @cert-authority.
ed=$(cut -d' ' -f1,2 "$out/ed25519.pub"); ec=$(cut -d' ' -f1,2 "$out/ecdsa-256.pub"); other=$(cut -d' ' -f1,2 "$out/ecdsa-384.pub")
{
  echo "plain.example $ed"
  echo "*.wild.example,!bad.wild.example $ec"
  echo "[ported.example]:2222 $ed"
  echo "hashed.example $ec"
  echo "[hashed-port.example]:2022 $ed"
} > "$out/known_hosts.tmp"
ssh-keygen -H -f "$out/known_hosts.tmp" >/dev/null 2>&1
rm -f "$out/known_hosts.tmp.old"
{
  echo "# farcast test known_hosts"
  cat "$out/known_hosts.tmp"
  echo "@revoked * $other"
  echo "@cert-authority *.ca.example $ec"
  echo "this line is garbage"
} > "$out/known_hosts"
rm -f "$out/known_hosts.tmp"
# bcrypt-pbkdf known answers from PyPI bcrypt (installed into a throwaway venv).
venv=$(mktemp -d)
python3 -m venv "$venv" && "$venv/bin/pip" install -q 'bcrypt==5.0.0'
"$venv/bin/python" - > Tests/HostsTests/Fixtures/bcrypt_pbkdf.json <<'PY'
import bcrypt, json, warnings
warnings.simplefilter("ignore")
cases = []
for password, salt, rounds, length in [
    (b"password", b"salt", 4, 32), (b"password", b"salt", 8, 64), (b"p", b"salt", 1, 16),
    (b"correct horse battery staple", bytes(range(16)), 16, 48), (b"\xff" * 80, b"s" * 33, 2, 100),
    (b"x", b"y", 1, 1), (b"long salt", bytes(range(256)) * 2, 3, 37),
]:
    cases.append({"password": password.hex(), "salt": salt.hex(), "rounds": rounds,
                  "key": bcrypt.kdf(password, salt, length, rounds, ignore_few_rounds=True).hex()})
print(json.dumps(cases, indent=1))
PY
rm -rf "$venv"
echo "wrote $out and Tests/HostsTests/Fixtures/bcrypt_pbkdf.json"
