// The xlalint extension: runs `xlalint server` (diagnostics, quick fixes, fix-all; Python
// files and the Python cells of notebooks), a "Fix all" command, and rule docs from
// `xlalint rule CODE` in a read-only markdown document.

import { execFile } from "node:child_process";
import { statSync } from "node:fs";
import { homedir } from "node:os";
import * as vscode from "vscode";
import {
  CodeActionRequest,
  CodeActionResolveRequest,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import {
  COMMANDS,
  type CommandLine,
  codeOf,
  describe,
  FIX_ALL,
  initializationOptions,
  normalizeRuleCode,
  ruleCodesAt,
  ruleDocsCommand,
  SOURCE,
  serverCommand,
} from "./logic";

const RULE_DOCS_SCHEME = "xlalint-rule";
/** Settings whose change needs a new server (it reads them at start). */
const RESTART_SETTINGS = ["xlalint.path", "xlalint.interpreter", "xlalint.unsafeFixes"];

let client: LanguageClient | undefined;
let launched: CommandLine | undefined;
let output: vscode.OutputChannel;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("xlalint");
  const ruleDocs = new RuleDocs();
  context.subscriptions.push(
    output,
    vscode.workspace.registerTextDocumentContentProvider(RULE_DOCS_SCHEME, ruleDocs),
    vscode.languages.registerCodeActionsProvider(
      { language: "python" },
      new RuleDocsActions(),
      { providedCodeActionKinds: [vscode.CodeActionKind.QuickFix] },
    ),
    vscode.commands.registerCommand(COMMANDS.fixAll, fixAll),
    vscode.commands.registerCommand(COMMANDS.showRuleDocs, (code?: string) => showRuleDocs(code)),
    vscode.commands.registerCommand(COMMANDS.restart, restart),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (RESTART_SETTINGS.some((setting) => event.affectsConfiguration(setting))) {
        await restart();
      }
    }),
  );
  await watchPythonInterpreter(context);
  restarting = start();
  await restarting;
}

export async function deactivate(): Promise<void> {
  await stop();
}

async function start(): Promise<void> {
  const line = await resolveServerCommand();
  launched = line;
  output.appendLine(`Starting the server (from ${line.origin}): ${describe(line)}`);
  const serverOptions: ServerOptions = { command: line.command, args: line.args, options: { cwd: workspaceFolder() } };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
      { notebook: "*", language: "python" },
    ],
    initializationOptions: initializationOptions(settings().get<boolean>("unsafeFixes", false)),
    outputChannel: output,
    diagnosticCollectionName: SOURCE,
  };
  client = new LanguageClient("xlalint", "xlalint", serverOptions, clientOptions);
  try {
    await client.start();
  } catch (error) {
    const action = await vscode.window.showErrorMessage(
      `xlalint: the server did not start (${describe(line)}, from ${line.origin}): ${message(error)}. ` +
        "Set xlalint.path or xlalint.interpreter to an xlalint installed with its `server` extra.",
      "Open settings",
    );
    if (action) {
      await vscode.commands.executeCommand("workbench.action.openSettings", "xlalint.");
    }
  }
}

async function stop(): Promise<void> {
  const running = client;
  client = undefined;
  if (running?.isRunning()) {
    await running.stop();
  }
}

/** Restarts one after another: a settings change can come twice (the file and the UI). */
let restarting: Promise<void> = Promise.resolve();

function restart(): Promise<void> {
  restarting = restarting.then(async () => {
    await stop();
    await start();
  });
  return restarting;
}

function settings(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration("xlalint", vscode.workspace.workspaceFolders?.[0]?.uri);
}

function workspaceFolder(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

async function resolveServerCommand(): Promise<CommandLine> {
  const config = settings();
  const chosen = { path: config.get<string>("path", ""), interpreter: config.get<string>("interpreter", "") };
  const python = chosen.path.trim() || chosen.interpreter.trim() ? undefined : await pythonInterpreter();
  return serverCommand(
    chosen,
    python,
    { workspaceFolder: workspaceFolder(), home: homedir() },
    { virtualEnv: process.env.VIRTUAL_ENV, platform: process.platform, isFile },
  );
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** The Python extension's API, as far as it is read here (it may be absent, or older). */
interface PythonApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment(path: { path: string } | string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

async function pythonApi(): Promise<PythonApi | undefined> {
  const extension = vscode.extensions.getExtension<PythonApi>("ms-python.python");
  if (!extension) {
    return undefined;
  }
  try {
    return extension.isActive ? extension.exports : await extension.activate();
  } catch (error) {
    output.appendLine(`The Python extension did not activate: ${message(error)}`);
    return undefined;
  }
}

async function pythonInterpreter(): Promise<string | undefined> {
  const environments = (await pythonApi())?.environments;
  if (!environments) {
    return undefined;
  }
  try {
    const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
    const environment = await environments.resolveEnvironment(environments.getActiveEnvironmentPath(resource));
    return environment?.executable.uri?.fsPath;
  } catch (error) {
    output.appendLine(`The Python extension gave no interpreter: ${message(error)}`);
    return undefined;
  }
}

async function watchPythonInterpreter(context: vscode.ExtensionContext): Promise<void> {
  const environments = (await pythonApi())?.environments;
  if (environments) {
    context.subscriptions.push(
      environments.onDidChangeActiveEnvironmentPath(async () => {
        if (launched?.origin === "the Python extension's interpreter") {
          await restart();
        }
      }),
    );
  }
}

/** The document "Fix all" acts on: the active editor's, or a notebook's first Python cell. */
function activeDocument(): vscode.TextDocument | undefined {
  const editor = vscode.window.activeTextEditor;
  if (editor) {
    return editor.document;
  }
  const notebook = vscode.window.activeNotebookEditor?.notebook;
  return notebook
    ?.getCells()
    .find((cell) => cell.kind === vscode.NotebookCellKind.Code && cell.document.languageId === "python")?.document;
}

async function fixAll(): Promise<void> {
  const document = activeDocument();
  if (!document || !client?.isRunning()) {
    await vscode.window.showWarningMessage("xlalint: no Python document open, or the server is not running.");
    return;
  }
  // Asked of the server itself (not every provider of the kind), for the whole document;
  // on a notebook cell its edit covers every cell it changes.
  const whole = new vscode.Range(0, 0, document.lineCount, 0);
  const actions = await client.sendRequest(CodeActionRequest.type, {
    textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri) },
    range: client.code2ProtocolConverter.asRange(whole),
    context: { diagnostics: [], only: [FIX_ALL] },
  });
  let fix = actions?.find((action) => "kind" in action && action.kind === FIX_ALL);
  if (fix && "kind" in fix && !fix.edit && fix.data !== undefined) {
    // The server computes fix-all's edit when it is asked for (codeAction/resolve): on a
    // large file that takes seconds, which the code actions asked while typing must not.
    fix = await client.sendRequest(CodeActionResolveRequest.type, fix);
  }
  if (!fix || !("edit" in fix) || !fix.edit) {
    await vscode.window.showInformationMessage("xlalint: nothing to fix.");
    return;
  }
  await vscode.workspace.applyEdit(await client.protocol2CodeConverter.asWorkspaceEdit(fix.edit));
}

async function showRuleDocs(given?: string): Promise<void> {
  let code = given === undefined ? undefined : normalizeRuleCode(given);
  if (code === undefined) {
    const editor = vscode.window.activeTextEditor;
    const codes = editor
      ? ruleCodesAt(vscode.languages.getDiagnostics(editor.document.uri), editor.selection.active)
      : [];
    code =
      codes.length > 1
        ? await vscode.window.showQuickPick(codes, { placeHolder: "Which rule?" })
        : (codes[0] ??
          normalizeRuleCode(
            (await vscode.window.showInputBox({
              prompt: "xlalint rule code",
              placeHolder: "XLA101",
              validateInput: (text) => (normalizeRuleCode(text) ? undefined : "a code such as XLA101"),
            })) ?? "",
          ));
  }
  if (code === undefined) {
    return;
  }
  const document = await vscode.workspace.openTextDocument(vscode.Uri.from({ scheme: RULE_DOCS_SCHEME, path: `/${code}.md` }));
  await vscode.window.showTextDocument(document, { viewColumn: vscode.ViewColumn.Beside, preview: true });
}

/** `xlalint rule CODE`'s markdown, from the xlalint the server runs. */
class RuleDocs implements vscode.TextDocumentContentProvider {
  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const code = normalizeRuleCode(uri.path.replace(/^\//, "").replace(/\.md$/, ""));
    if (code === undefined) {
      return `Not a rule code: ${uri.path}`;
    }
    const line = ruleDocsCommand(launched ?? (await resolveServerCommand()), code);
    return new Promise((resolve) => {
      execFile(line.command, line.args, { cwd: workspaceFolder(), timeout: 30_000 }, (error, stdout, stderr) => {
        resolve(error ? `\`${describe(line)}\` failed: ${stderr.trim() || error.message}` : stdout);
      });
    });
  }
}

/** "Show docs for XLAnnn" beside each of xlalint's findings, as ruff offers. */
class RuleDocsActions implements vscode.CodeActionProvider {
  provideCodeActions(
    _document: vscode.TextDocument,
    _range: vscode.Range,
    context: vscode.CodeActionContext,
  ): vscode.CodeAction[] {
    const actions: vscode.CodeAction[] = [];
    for (const diagnostic of context.diagnostics) {
      const code = diagnostic.source === SOURCE ? codeOf(diagnostic) : undefined;
      if (code !== undefined && !actions.some((action) => action.command?.arguments?.[0] === code)) {
        const action = new vscode.CodeAction(`xlalint: show docs for ${code}`, vscode.CodeActionKind.QuickFix);
        action.command = { title: action.title, command: COMMANDS.showRuleDocs, arguments: [code] };
        action.diagnostics = [diagnostic];
        actions.push(action);
      }
    }
    return actions;
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
