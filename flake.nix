{
  description = "rewind-fuzz: a schedule-space fuzzer for multithreaded Linux programs";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";
    flake-utils.url = "github:numtide/flake-utils";
  };

  outputs = { self, nixpkgs, flake-utils }:
    flake-utils.lib.eachSystem [ "x86_64-linux" ] (system:
      let
        pkgs = import nixpkgs { inherit system; };
        # Programs the tests build and drive: compilers for the harnesses
        # and the shim, gdb for the debugger tests.
        tools = with pkgs; [ gcc gdb strace ];
      in
      {
        packages.default = pkgs.rustPlatform.buildRustPackage {
          pname = "rewind-fuzz";
          version = "0.1.0";
          src = ./.;
          cargoLock.lockFile = ./Cargo.lock;
          nativeBuildInputs = [ pkgs.gcc ];
          # The tests need /dev/kvm, which the build sandbox does not have.
          doCheck = false;
          meta = {
            description = "Schedule-space fuzzer for multithreaded Linux programs";
            platforms = [ "x86_64-linux" ];
            mainProgram = "rewind-fuzz";
          };
        };

        devShells.default = pkgs.mkShell {
          packages = with pkgs; [ rustc cargo clippy rustfmt cargo-nextest ] ++ tools;
        };
      });
}
