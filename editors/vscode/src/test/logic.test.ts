import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe as group, test } from "node:test";
import {
  COMMANDS,
  type CommandLine,
  describe,
  expandVariables,
  FIX_ALL,
  initializationOptions,
  normalizeRuleCode,
  ruleCodesAt,
  ruleDocsCommand,
  SETTINGS,
  serverCommand,
} from "../logic";

// Compiled to out/test/: the extension's folder is two up, the repository four up.
const extensionRoot = join(__dirname, "..", "..");
const repositoryRoot = join(extensionRoot, "..", "..");
const variables = { workspaceFolder: "/work/project", home: "/home/me" };
const unset = { path: "", interpreter: "" };

group("serverCommand", () => {
  test("xlalint.path runs that executable's server", () => {
    assert.deepEqual(serverCommand({ path: "/opt/xl/bin/xlalint", interpreter: "" }, "/usr/bin/python3", variables), {
      command: "/opt/xl/bin/xlalint",
      args: ["server"],
      origin: "xlalint.path",
    });
  });

  test("xlalint.path wins over xlalint.interpreter", () => {
    const line = serverCommand({ path: "/opt/xl/bin/xlalint", interpreter: "/usr/bin/python3" }, undefined, variables);
    assert.equal(line.command, "/opt/xl/bin/xlalint");
    assert.equal(line.origin, "xlalint.path");
  });

  test("xlalint.interpreter runs -m xlalint server", () => {
    assert.deepEqual(serverCommand({ path: "", interpreter: "/venv/bin/python" }, "/usr/bin/python3", variables), {
      command: "/venv/bin/python",
      args: ["-m", "xlalint", "server"],
      origin: "xlalint.interpreter",
    });
  });

  test("unset: the Python extension's interpreter, with -m xlalint", () => {
    assert.deepEqual(serverCommand(unset, "/env/bin/python", variables), {
      command: "/env/bin/python",
      args: ["-m", "xlalint", "server"],
      origin: "the Python extension's interpreter",
    });
  });

  test("unset, no Python extension, an activated venv: its xlalint (code-server's PATH may lack it)", () => {
    const environment = { virtualEnv: "/home/me/.venv/", platform: "linux", isFile: (p: string) => p === "/home/me/.venv/bin/xlalint" };
    assert.deepEqual(serverCommand(unset, undefined, variables, environment), {
      command: "/home/me/.venv/bin/xlalint",
      args: ["server"],
      origin: "VIRTUAL_ENV",
    });
    const windows = { virtualEnv: "C:\\venv", platform: "win32", isFile: (p: string) => p === "C:\\venv\\Scripts\\xlalint.exe" };
    assert.equal(serverCommand(unset, undefined, variables, windows).command, "C:\\venv\\Scripts\\xlalint.exe");
  });

  test("the selected interpreter wins over VIRTUAL_ENV, and a venv without xlalint falls to the PATH", () => {
    const environment = { virtualEnv: "/venv", platform: "linux", isFile: () => true };
    assert.equal(serverCommand(unset, "/env/bin/python", variables, environment).origin, "the Python extension's interpreter");
    const without = { virtualEnv: "/venv", platform: "linux", isFile: () => false };
    assert.equal(serverCommand(unset, undefined, variables, without).origin, "PATH");
    assert.equal(serverCommand(unset, undefined, variables, { platform: "linux", isFile: () => true }).origin, "PATH");
  });

  test("unset and no Python extension: xlalint on the PATH", () => {
    assert.deepEqual(serverCommand(unset, undefined, variables), {
      command: "xlalint",
      args: ["server"],
      origin: "PATH",
    });
  });

  test("blank settings count as unset", () => {
    assert.equal(serverCommand({ path: "  ", interpreter: "\t" }, undefined, variables).origin, "PATH");
  });

  test("~ and ${workspaceFolder} are expanded in both settings", () => {
    assert.equal(serverCommand({ path: "~/bin/xlalint", interpreter: "" }, undefined, variables).command, "/home/me/bin/xlalint");
    assert.equal(
      serverCommand({ path: "", interpreter: "${workspaceFolder}/.venv/bin/python" }, undefined, variables).command,
      "/work/project/.venv/bin/python",
    );
  });
});

group("expandVariables", () => {
  test("~ only at the start, as a whole segment", () => {
    assert.equal(expandVariables("~", variables), "/home/me");
    assert.equal(expandVariables("~other/bin", variables), "~other/bin");
    assert.equal(expandVariables("/a/~/b", variables), "/a/~/b");
  });

  test("${workspaceFolder} stays when there is no folder open", () => {
    assert.equal(expandVariables("${workspaceFolder}/x", { home: "/h" }), "${workspaceFolder}/x");
  });
});

group("ruleDocsCommand", () => {
  const python: CommandLine = { command: "/venv/bin/python", args: ["-m", "xlalint", "server"], origin: "xlalint.interpreter" };

  test("the same xlalint as the server, running `rule CODE`", () => {
    assert.deepEqual(ruleDocsCommand(python, "XLA101"), { ...python, args: ["-m", "xlalint", "rule", "XLA101"] });
    const executable = serverCommand(unset, undefined, variables);
    assert.deepEqual(ruleDocsCommand(executable, "XLA203").args, ["rule", "XLA203"]);
  });

  test("says the command line as a shell would take it", () => {
    assert.equal(describe(ruleDocsCommand(python, "XLA101")), "/venv/bin/python -m xlalint rule XLA101");
    assert.equal(describe({ ...python, command: "/my env/python" }), "'/my env/python' -m xlalint server");
  });
});

group("rule codes", () => {
  test("normalizeRuleCode takes XLAnnn in any case, nothing else", () => {
    assert.equal(normalizeRuleCode(" xla101 "), "XLA101");
    assert.equal(normalizeRuleCode("XLA1011"), undefined);
    assert.equal(normalizeRuleCode("E501"), undefined);
    assert.equal(normalizeRuleCode("--all"), undefined);
  });

  const at = (line: number, character: number) => ({ line, character });
  const finding = (code: string, start: [number, number], end: [number, number], source = "xlalint") => ({
    source,
    code,
    range: { start: at(...start), end: at(...end) },
  });

  test("ruleCodesAt: xlalint's findings around the position, each code once, in order", () => {
    const diagnostics = [
      finding("XLA203", [2, 4], [2, 20]),
      finding("E501", [2, 0], [2, 90], "ruff"),
      finding("XLA101", [1, 0], [3, 0]),
      finding("XLA203", [2, 0], [2, 30]),
      finding("XLA301", [5, 0], [5, 9]),
    ];
    assert.deepEqual(ruleCodesAt(diagnostics, at(2, 10)), ["XLA203", "XLA101"]);
    assert.deepEqual(ruleCodesAt(diagnostics, at(2, 2)), ["XLA101", "XLA203"]);
    assert.deepEqual(ruleCodesAt(diagnostics, at(4, 0)), []);
  });

  test("ruleCodesAt: range ends count, and vscode's {value} codes are read", () => {
    const diagnostics = [{ source: "xlalint", code: { value: "XLA104" }, range: { start: at(7, 3), end: at(7, 8) } }];
    assert.deepEqual(ruleCodesAt(diagnostics, at(7, 3)), ["XLA104"]);
    assert.deepEqual(ruleCodesAt(diagnostics, at(7, 8)), ["XLA104"]);
    assert.deepEqual(ruleCodesAt(diagnostics, at(7, 9)), []);
  });
});

group("the manifest and the server agree with the extension", () => {
  const manifest = JSON.parse(readFileSync(join(extensionRoot, "package.json"), "utf8"));

  test("every command declared is one the extension registers, and back", () => {
    const declared = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
    assert.deepEqual(declared, Object.values(COMMANDS).sort());
  });

  test("every setting declared is one the extension reads, and back", () => {
    assert.deepEqual(Object.keys(manifest.contributes.configuration.properties).sort(), [...SETTINGS].sort());
  });

  test("the server reads the unsafe-fixes option the extension sends, and offers its fix-all kind", () => {
    const [key] = Object.keys(initializationOptions(true));
    assert.deepEqual(initializationOptions(true), { unsafeFixes: true });
    const server = readFileSync(join(repositoryRoot, "xlalint", "server.py"), "utf8");
    assert.match(server, new RegExp(`options\\.get\\("${key}"\\)`));
    const serverLint = readFileSync(join(repositoryRoot, "xlalint", "server_lint.py"), "utf8");
    assert.match(serverLint, new RegExp(`^FIX_ALL = "${FIX_ALL.replace(/\./g, "\\.")}"$`, "m"));
  });
});
