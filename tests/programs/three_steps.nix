# Three builders, each adding to the one before; `nonce` makes a build
# anew (tests/nix.rs, the README).
{ nonce ? "0" }:
let
  step = name: dep: derivation {
    inherit name nonce;
    system = builtins.currentSystem;
    builder = "/bin/sh";
    args = [ "-c" "echo ${name} > $out; ${if dep == null then "" else "/bin/cat ${dep} >> $out"}" ];
  };
in step "c" (step "b" (step "a" null))
