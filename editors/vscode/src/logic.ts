// What the extension decides on its own, kept apart from the `vscode` module so node's
// test runner can check it: the command line that starts the server, the options sent
// with `initialize`, which rule codes a position has, and the names the manifest shares.

/** The commands, as package.json's `contributes.commands` declares them. */
export const COMMANDS = {
  fixAll: "xlalint.fixAll",
  showRuleDocs: "xlalint.showRuleDocs",
  restart: "xlalint.restart",
} as const;

/** The settings read, as package.json's `contributes.configuration` declares them. */
export const SETTINGS = ["xlalint.path", "xlalint.interpreter", "xlalint.unsafeFixes", "xlalint.trace.server"];

/** The server's fix-all code action kind (xlalint/server_lint.py's FIX_ALL). */
export const FIX_ALL = "source.fixAll.xlalint";

/** The settings that choose the server's command line, as read (`""` when unset). */
export interface LaunchSettings {
  path: string;
  interpreter: string;
}

/** A command and its arguments, run without a shell. */
export interface CommandLine {
  command: string;
  args: string[];
  /** Which setting chose it, said in the output and in errors. */
  origin: "xlalint.path" | "xlalint.interpreter" | "the Python extension's interpreter" | "VIRTUAL_ENV" | "PATH";
}

/** What `${workspaceFolder}` and `~` stand for. */
export interface Variables {
  workspaceFolder?: string;
  home: string;
}

export const SERVER_ARGS = ["server"];

/** The environment the extension host runs in, as far as finding the server reads it. */
export interface Environment {
  /** `VIRTUAL_ENV`: set by `activate`, also when the host's PATH lacks the venv (code-server started from one). */
  virtualEnv?: string;
  platform: string;
  isFile(path: string): boolean;
}

/** `xlalint` in a virtual environment's scripts folder (`bin/`, `Scripts\` on Windows). */
export function venvExecutable(virtualEnv: string, platform: string): string {
  const windows = platform === "win32";
  const separator = windows ? "\\" : "/";
  const root = virtualEnv.replace(/[\\/]+$/, "");
  return windows ? `${root}${separator}Scripts${separator}xlalint.exe` : `${root}${separator}bin${separator}xlalint`;
}

/** `~` at the start, and `${workspaceFolder}` anywhere (left as is when there is no folder). */
export function expandVariables(value: string, variables: Variables): string {
  let expanded = value.trim();
  if (expanded === "~" || expanded.startsWith("~/")) {
    expanded = variables.home + expanded.slice(1);
  }
  if (variables.workspaceFolder !== undefined) {
    expanded = expanded.split("${workspaceFolder}").join(variables.workspaceFolder);
  }
  return expanded;
}

/**
 * The server's command line: `xlalint.path` (an executable), else `xlalint.interpreter`
 * (a python with xlalint installed: `-m xlalint`), else the Python extension's selected
 * interpreter, else the `xlalint` of the activated virtual environment (`VIRTUAL_ENV`,
 * when it has one), else `xlalint` on the PATH, as ruff's extension finds ruff.
 */
export function serverCommand(
  settings: LaunchSettings,
  pythonInterpreter: string | undefined,
  variables: Variables,
  environment?: Environment,
): CommandLine {
  const path = expandVariables(settings.path, variables);
  if (path) {
    return { command: path, args: [...SERVER_ARGS], origin: "xlalint.path" };
  }
  const interpreter = expandVariables(settings.interpreter, variables);
  if (interpreter) {
    return { command: interpreter, args: ["-m", "xlalint", ...SERVER_ARGS], origin: "xlalint.interpreter" };
  }
  if (pythonInterpreter) {
    return {
      command: pythonInterpreter,
      args: ["-m", "xlalint", ...SERVER_ARGS],
      origin: "the Python extension's interpreter",
    };
  }
  const virtualEnv = environment?.virtualEnv?.trim();
  if (virtualEnv && environment) {
    const executable = venvExecutable(virtualEnv, environment.platform);
    if (environment.isFile(executable)) {
      return { command: executable, args: [...SERVER_ARGS], origin: "VIRTUAL_ENV" };
    }
  }
  return { command: "xlalint", args: [...SERVER_ARGS], origin: "PATH" };
}

/** The same xlalint as the server's command line, running another subcommand. */
export function subcommand(server: CommandLine, args: string[]): CommandLine {
  const before = server.args.slice(0, server.args.length - SERVER_ARGS.length);
  return { ...server, args: [...before, ...args] };
}

/** The `xlalint rule CODE` command line (the text is markdown). */
export function ruleDocsCommand(server: CommandLine, code: string): CommandLine {
  return subcommand(server, ["rule", code]);
}

/** The server reads `unsafeFixes` from `initialize`'s options (xlalint/server.py). */
export function initializationOptions(unsafeFixes: boolean): { unsafeFixes: boolean } {
  return { unsafeFixes };
}

const RULE_CODE = /^XLA\d{3}$/;

/** A rule code as `xlalint rule` takes it (`xla101` → `XLA101`), or undefined. */
export function normalizeRuleCode(text: string): string | undefined {
  const code = text.trim().toUpperCase();
  return RULE_CODE.test(code) ? code : undefined;
}

interface Position {
  line: number;
  character: number;
}

/** The part of a diagnostic this module reads (vscode's and LSP's both fit). */
export interface DiagnosticLike {
  source?: string;
  code?: string | number | { value: string | number };
  range: { start: Position; end: Position };
}

export const SOURCE = "xlalint";

function before(a: Position, b: Position): boolean {
  return a.line < b.line || (a.line === b.line && a.character <= b.character);
}

export function codeOf(diagnostic: DiagnosticLike): string | undefined {
  const code = diagnostic.code;
  const text = typeof code === "object" ? String(code.value) : code === undefined ? "" : String(code);
  return normalizeRuleCode(text);
}

/** The codes of xlalint's diagnostics whose range holds `position`, each once, in order. */
export function ruleCodesAt(diagnostics: readonly DiagnosticLike[], position: Position): string[] {
  const codes: string[] = [];
  for (const diagnostic of diagnostics) {
    if (diagnostic.source !== SOURCE) {
      continue;
    }
    const code = codeOf(diagnostic);
    if (
      code !== undefined &&
      !codes.includes(code) &&
      before(diagnostic.range.start, position) &&
      before(position, diagnostic.range.end)
    ) {
      codes.push(code);
    }
  }
  return codes;
}

/** The command line as a user would type it, for messages. */
export function describe(line: CommandLine): string {
  const quote = (part: string) => (/^[\w@%+=:,./-]+$/.test(part) ? part : `'${part.replace(/'/g, "'\\''")}'`);
  return [line.command, ...line.args].map(quote).join(" ");
}
