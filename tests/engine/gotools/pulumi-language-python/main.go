// Command pulumi-language-python is a STAND-IN for Pulumi's Python language host.
//
// The real one is the Go module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3,
// which the Go module proxy this project can reach does not serve (403 "This module version is not
// available" at every version), and Pulumi's release archives can't be downloaded here either. The
// Pulumi CLI needs a language host to run a Python program (`pulumi preview`, `pulumi up`) and a
// Python policy pack (`--policy-pack`), so tests/engine/build_go_tools.sh builds this one beside the
// CLI instead. It is our own code, written against the LanguageRuntime gRPC service and the
// libraries of the served github.com/pulumi/pulumi/sdk/v3 module of the same release as the CLI:
// python/toolchain (virtualenvs, pip/poetry/uv), the policy-pack proxy (package sdk) and rpcutil.
//
// What it does, as the engine expects of a Python language host:
//   - Run: runs the program with pulumi-language-python-exec, the upstream script that the sdk/v3
//     module carries and the build installs next to this binary, under the project's toolchain
//     and virtualenv (runtime.options of Pulumi.yaml), with the stack's config in PULUMI_CONFIG and
//     PULUMI_CONFIG_SECRET_KEYS; exit code 32 means the program already told the user why.
//   - GetRequiredPackages: the resource plugins the installed pulumi-* packages (and any package
//     with a pulumi-plugin.json) need, from that pulumi-plugin.json or the package's version.
//   - InstallDependencies, About, GetProgramDependencies: through the toolchain.
//   - RunPlugin: a policy pack (kind analyzer) runs as `python -u -m pulumi.policy ENGINE DIR`
//     from the pack's directory, behind the sdk's PolicyProxy, which hands the pack its stack
//     configuration in the environment; another plugin runs as `python DIR ARGS...` or, for a
//     buildable package with no __main__.py, `python -m pulumi.run.plugin NAME ARGS...`.
//
// What it does not do: the code generation RPCs (GenerateProject, GenerateProgram,
// GeneratePackage, Pack, Link: `pulumi convert`, `pulumi package gen-sdk`, `pulumi new` prompts)
// answer Unimplemented, and --attach-debugger is refused.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdk "github.com/pulumi/pulumi/sdk/v3"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/logging"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The exit code with which pulumi-language-python-exec says it has shown the user an error.
const exitAfterUserMessage = 32

func main() {
	tracing := flag.String("tracing", "", "Zipkin-compatible tracing endpoint (passed on to the program)")
	showVersion := flag.Bool("version", false, "print the version and exit")
	executor := flag.String("use-executor", "", "run programs with this script instead of the "+
		"pulumi-language-python-exec next to this binary")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Version)
		return
	}
	logging.InitLogging(false, 0, false)

	if *executor == "" {
		self, err := os.Executable()
		if err != nil {
			cmdutil.Exit(fmt.Errorf("finding this executable: %w", err))
		}
		*executor = filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")
		if _, err := os.Stat(*executor); err != nil {
			cmdutil.Exit(fmt.Errorf("missing executor: %w", err))
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	stopServing := make(chan bool)
	go func() { <-ctx.Done(); close(stopServing) }()

	host := &languageHost{exec: *executor, tracing: *tracing}
	host.cancelCtx, host.cancel = context.WithCancel(context.Background())
	if args := flag.Args(); len(args) > 0 {
		host.engine = args[0]
		// Stop when the engine goes away.
		if err := rpcutil.Healthcheck(ctx, host.engine, 5*time.Minute, stop); err != nil {
			cmdutil.Exit(fmt.Errorf("starting the engine health check: %w", err))
		}
	}

	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: stopServing,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, host)
			return nil
		},
	})
	if err != nil {
		cmdutil.Exit(fmt.Errorf("starting the language host's gRPC server: %w", err))
	}
	// The engine reads the port from the first line of stdout.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		cmdutil.Exit(fmt.Errorf("the language host's gRPC server stopped: %w", err))
	}
}

type languageHost struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	exec    string // pulumi-language-python-exec
	engine  string // the engine's gRPC address
	tracing string

	cancelCtx context.Context // done once the engine calls Cancel
	cancel    context.CancelFunc
}

// options reads runtime.options (virtualenv, toolchain, typechecker) of Pulumi.yaml or
// PulumiPolicy.yaml. A plugin other than a policy pack gets a "venv" virtualenv when it names
// none, as upstream's host does: plugins don't run in the ambient Python.
func options(info *pulumirpc.ProgramInfo, isPlugin bool) (toolchain.PythonOptions, error) {
	opts := toolchain.PythonOptions{Root: info.GetRootDirectory(), ProgramDir: info.GetProgramDirectory()}
	raw := info.GetOptions().AsMap()
	str := func(key string) (string, error) {
		v, ok := raw[key]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("runtime option %s must be a string", key)
		}
		return s, nil
	}
	var err error
	if opts.Virtualenv, err = str("virtualenv"); err != nil {
		return opts, err
	}
	tc, err := str("toolchain")
	if err != nil {
		return opts, err
	}
	switch tc {
	case "":
	case "pip":
		opts.Toolchain = toolchain.Pip
	case "poetry":
		opts.Toolchain = toolchain.Poetry
	case "uv":
		opts.Toolchain = toolchain.Uv
	default:
		return opts, fmt.Errorf("unsupported toolchain option: %s", tc)
	}
	checker, err := str("typechecker")
	if err != nil {
		return opts, err
	}
	switch checker {
	case "":
	case "mypy":
		opts.Typechecker = toolchain.TypeCheckerMypy
	case "pyright":
		opts.Typechecker = toolchain.TypeCheckerPyright
	default:
		return opts, fmt.Errorf("unsupported typechecker option: %s", checker)
	}
	if isPlugin && opts.Virtualenv == "" &&
		(opts.Toolchain == toolchain.Pip || opts.Toolchain == toolchain.Auto) {
		opts.Virtualenv = "venv"
	}
	return opts, nil
}

func (h *languageHost) Handshake(ctx context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.engine = req.GetEngineAddress()
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *languageHost) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

func (h *languageHost) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	h.cancel()
	return &emptypb.Empty{}, nil
}

// engineLog writes to the engine's log as ephemeral messages of one stream, as the output of a
// virtualenv being made during GetRequiredPackages is shown.
type engineLog struct {
	ctx      context.Context
	client   pulumirpc.EngineClient
	stream   int32
	severity pulumirpc.LogSeverity
}

func (w engineLog) Write(p []byte) (int, error) {
	_, err := w.client.Log(w.ctx, &pulumirpc.LogRequest{
		Message: strings.ToValidUTF8(string(p), "?"), Ephemeral: true,
		StreamId: w.stream, Severity: w.severity,
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *languageHost) engineWriters(ctx context.Context) (io.Writer, io.Writer, io.Closer, error) {
	if h.engine == "" {
		return nil, nil, nil, errors.New("no engine address: the engine must call Handshake first")
	}
	conn, err := grpc.NewClient(h.engine, grpc.WithTransportCredentials(insecure.NewCredentials()),
		rpcutil.GrpcChannelOptions())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connecting to the engine: %w", err)
	}
	client := pulumirpc.NewEngineClient(conn)
	stream := rand.Int31() //nolint:gosec // a stream id, not a secret
	return engineLog{ctx, client, stream, pulumirpc.LogSeverity_INFO},
		engineLog{ctx, client, stream, pulumirpc.LogSeverity_ERROR}, conn, nil
}

// No resource plugin goes with these packages.
var pluginless = map[string]bool{"pulumi-policy": true, "pulumi-esc-sdk": true}

// Prints, for each distribution named in argv, the path of the pulumi-plugin.json in its top-level
// package ("" if it has none), as a JSON object.
const findPluginJSON = `
import importlib.metadata, importlib.util, json, os, sys
found = {}
for name in sys.argv[1:]:
    found[name] = ""
    try:
        module = importlib.metadata.distribution(name).metadata["Name"].replace("-", "_")
        spec = importlib.util.find_spec(module)
    except Exception:
        continue
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = os.path.join(str(location), "pulumi-plugin.json")
        if os.path.isfile(candidate):
            found[name] = candidate
            break
print(json.dumps(found))
`

func (h *languageHost) GetRequiredPackages(ctx context.Context, req *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	opts, err := options(req.GetInfo(), false)
	if err != nil {
		return nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	stdout, stderr, closer, err := h.engineWriters(ctx)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	if err := tc.EnsureVenv(ctx, opts.ProgramDir, false, true, stdout, stderr); err != nil {
		return nil, err
	}
	installed, err := tc.ListPackages(ctx, true)
	if err != nil {
		return nil, err
	}
	args := []string{"-c", findPluginJSON}
	for _, pkg := range installed {
		args = append(args, pkg.Name)
	}
	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("looking for pulumi-plugin.json files: %w", err)
	}
	var jsonPaths map[string]string
	if err := json.Unmarshal(out, &jsonPaths); err != nil {
		return nil, fmt.Errorf("reading the pulumi-plugin.json paths: %w", err)
	}

	resp := &pulumirpc.GetRequiredPackagesResponse{}
	for _, pkg := range installed {
		if pluginless[pkg.Name] {
			continue
		}
		var meta *plugin.PulumiPluginJSON
		if path := jsonPaths[pkg.Name]; path != "" {
			if meta, err = plugin.LoadPulumiPluginJSON(path); err != nil {
				return nil, fmt.Errorf("reading %s: %w", path, err)
			}
		}
		if meta == nil && !strings.HasPrefix(pkg.Name, "pulumi-") {
			continue // not a Pulumi package
		}
		if dep := packageDependency(pkg, meta); dep != nil {
			resp.Packages = append(resp.Packages, dep)
		}
	}
	return resp, nil
}

// packageDependency is the resource plugin a Python package needs, or nil: none (pulumi-plugin.json
// says resource false) or its version is unknown (no version in pulumi-plugin.json and a package
// version that doesn't translate to a semver).
func packageDependency(pkg plugin.DependencyInfo, meta *plugin.PulumiPluginJSON) *pulumirpc.PackageDependency {
	dep := &pulumirpc.PackageDependency{Kind: string(apitype.ResourcePlugin)}
	if meta != nil {
		if !meta.Resource {
			return nil
		}
		dep.Name, dep.Version, dep.Server = meta.Name, meta.Version, meta.Server
		if p := meta.Parameterization; p != nil {
			dep.Parameterization = &pulumirpc.PackageParameterization{Name: p.Name, Version: p.Version, Value: p.Value}
		}
		if p := meta.ExtensionParameterization; p != nil {
			dep.Extension = &pulumirpc.PackageParameterization{Name: p.Name, Version: p.Version, Value: p.Value}
		}
	}
	if dep.Name == "" {
		dep.Name = strings.TrimPrefix(pkg.Name, "pulumi-")
	}
	if dep.Version == "" {
		v, ok := pep440ToSemver(pkg.Version)
		if !ok {
			logging.V(5).Infof("no plugin version for %s %s", pkg.Name, pkg.Version)
			return nil
		}
		dep.Version = v
	}
	if !strings.HasPrefix(dep.Version, "v") {
		dep.Version = "v" + dep.Version
	}
	return dep
}

var pep440 = regexp.MustCompile(`^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?$`)

// pep440ToSemver turns the common PEP 440 versions into semver: 1.2 -> 1.2.0, 1.2.3a4 ->
// 1.2.3-alpha.4, 1.2.3rc4 -> 1.2.3-rc.4, 1.2.3.post4.dev5 -> 1.2.3+post4dev5.
func pep440ToSemver(v string) (string, bool) {
	m := pep440.FindStringSubmatch(v)
	if m == nil {
		return "", false
	}
	parts := strings.Split(m[1], ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	s := strings.Join(parts, ".")
	if m[2] != "" {
		s += "-" + map[string]string{"a": "alpha", "b": "beta", "rc": "rc"}[m[2]] + "." + m[3]
	}
	if m[4] != "" || m[5] != "" {
		s += "+"
		if m[4] != "" {
			s += "post" + m[4]
		}
		if m[5] != "" {
			s += "dev" + m[5]
		}
	}
	return s, true
}

func (h *languageHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	if req.GetAttachDebugger() {
		return &pulumirpc.RunResponse{Error: "this stand-in language host can't attach a debugger"}, nil
	}
	opts, err := options(req.GetInfo(), false)
	if err != nil {
		return nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return nil, err
	}
	if err := typecheck(ctx, tc, opts); err != nil {
		return nil, err
	}

	args := []string{h.exec}
	flagArg := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name, value)
		}
	}
	flagArg("monitor", req.GetMonitorAddress())
	flagArg("engine", h.engine)
	flagArg("project", req.GetProject())
	flagArg("root_directory", req.GetInfo().GetRootDirectory())
	flagArg("stack", req.GetStack())
	flagArg("pwd", req.GetPwd())
	flagArg("dry_run", strconv.FormatBool(req.GetDryRun()))
	flagArg("parallel", strconv.Itoa(int(req.GetParallel())))
	flagArg("tracing", h.tracing)
	flagArg("organization", req.GetOrganization())
	args = append(args, req.GetInfo().GetEntryPoint())
	args = append(args, req.GetArgs()...)

	// Ended by the engine's Cancel or by the end of this request.
	runCtx, stop := context.WithCancel(h.cancelCtx)
	defer stop()
	context.AfterFunc(ctx, stop)
	cmd, err := tc.Command(runCtx, args...)
	if err != nil {
		return nil, err
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr

	config, err := json.Marshal(req.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("serializing the configuration: %w", err)
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secretKeysJSON, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, fmt.Errorf("serializing the secret configuration keys: %w", err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	if req.GetConfig() != nil {
		cmd.Env = append(cmd.Env, "PULUMI_CONFIG="+string(config))
	}
	cmd.Env = append(cmd.Env, "PULUMI_CONFIG_SECRET_KEYS="+string(secretKeysJSON))

	err = cmd.Run()
	if err == nil {
		return &pulumirpc.RunResponse{}, nil
	}
	// Let the engine read what the program wrote before it failed.
	_ = os.Stdout.Sync()
	_ = os.Stderr.Sync()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return &pulumirpc.RunResponse{
			Error: fmt.Sprintf("problem executing program (could not run language executor): %v", err),
		}, nil
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Exited() {
		if ws.ExitStatus() == exitAfterUserMessage {
			return &pulumirpc.RunResponse{Bail: true}, nil
		}
		return &pulumirpc.RunResponse{
			Error: fmt.Sprintf("program exited with non-zero exit code: %d", ws.ExitStatus()),
		}, nil
	}
	return &pulumirpc.RunResponse{Error: fmt.Sprintf("program exited unexpectedly: %v", exitErr)}, nil
}

// typecheck runs the typechecker that runtime.options names over the program, before it runs.
func typecheck(ctx context.Context, tc toolchain.Toolchain, opts toolchain.PythonOptions) error {
	var module string
	var args []string
	switch opts.Typechecker {
	case toolchain.TypeCheckerMypy:
		module = "mypy"
		venv, err := tc.VirtualEnvPath(ctx)
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(opts.ProgramDir, venv); err == nil {
			args = append(args, "--exclude", rel)
		}
	case toolchain.TypeCheckerPyright:
		module = "pyright"
	default:
		return nil
	}
	cmd, err := tc.ModuleCommand(ctx, module, append(args, opts.ProgramDir)...)
	if err != nil {
		return err
	}
	cmd.Dir = opts.ProgramDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s failed: %w\n%s", module, err, out)
	}
	return nil
}

func (h *languageHost) InstallDependencies(req *pulumirpc.InstallDependenciesRequest,
	server pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	opts, err := options(req.GetInfo(), req.GetIsPlugin())
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeInstallDependenciesStreams(server, req.GetIsTerminal())
	if err != nil {
		return err
	}
	defer closer.Close()
	ctx := server.Context()
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "Installing dependencies...")
	// A plugin that is a Python package (a pyproject.toml with a build system) is installed itself.
	if req.GetIsPlugin() {
		buildable, err := toolchain.IsBuildablePackage(opts.ProgramDir)
		if err != nil {
			return err
		}
		if buildable {
			if err := tc.EnsureVenv(ctx, opts.ProgramDir, req.GetUseLanguageVersionTools(), true,
				stdout, stderr); err != nil {
				return err
			}
			cmd, err := tc.ModuleCommand(ctx, "pip", "install", opts.ProgramDir)
			if err != nil {
				return err
			}
			cmd.Stdout, cmd.Stderr = stdout, stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("installing the plugin package: %w", err)
			}
		}
	}
	if err := tc.InstallDependencies(ctx, opts.ProgramDir, req.GetUseLanguageVersionTools(), true,
		stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "Finished installing dependencies")
	return closer.Close()
}

func (h *languageHost) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	opts := toolchain.PythonOptions{Toolchain: toolchain.Pip}
	if req.GetInfo() != nil {
		var err error
		if opts, err = options(req.GetInfo(), false); err != nil {
			return nil, err
		}
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	info, err := tc.About(ctx)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{
		Executable: info.PythonExecutable,
		Version:    info.PythonVersion.String(),
		Metadata: map[string]string{
			"toolchain":        toolchain.Name(opts.Toolchain),
			"toolchainVersion": info.ToolchainVersion.String(),
			"typechecker":      toolchain.TypeCheckerName(opts.Typechecker),
			"languageHost":     "stand-in (openstack-on-k8s tests/engine/gotools/pulumi-language-python)",
		},
	}, nil
}

func (h *languageHost) GetProgramDependencies(ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	opts, err := options(req.GetInfo(), false)
	if err != nil {
		return nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	pkgs, err := tc.ListPackages(ctx, req.GetTransitiveDependencies())
	if err != nil {
		return nil, fmt.Errorf("listing the Python packages: %w", err)
	}
	resp := &pulumirpc.GetProgramDependenciesResponse{}
	for _, p := range pkgs {
		resp.Dependencies = append(resp.Dependencies, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return resp, nil
}

func (h *languageHost) RunPlugin(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	if req.GetAttachDebugger() {
		return status.Error(codes.Unimplemented, "this stand-in language host can't attach a debugger")
	}
	ctx := server.Context()
	policyPack := req.GetKind() == string(apitype.AnalyzerPlugin)
	opts, err := options(req.GetInfo(), !policyPack)
	if err != nil {
		return err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}

	var cmd *exec.Cmd
	dir := req.GetInfo().GetProgramDirectory()
	switch {
	case policyPack:
		// pulumi.policy (of the pulumi SDK) loads the pack's __main__.py and serves the Analyzer
		// service; the engine's address comes first, the pack's directory last.
		args := append([]string{"-u", "-m", "pulumi.policy"}, req.GetArgs()...)
		cmd, err = tc.Command(ctx, append(args, dir)...)
	case !exists(filepath.Join(opts.Root, "__main__.py")) && hasModule(ctx, tc, "pulumi.run.plugin"):
		pyproject, perr := toolchain.LoadPyproject(opts.Root)
		if perr != nil {
			return fmt.Errorf("plugin has no __main__.py and no loadable pyproject.toml: %w", perr)
		}
		cmd, err = tc.ModuleCommand(ctx, "pulumi.run.plugin", append([]string{pyproject.Project.Name}, req.GetArgs()...)...)
	default:
		cmd, err = tc.Command(ctx, append([]string{dir}, req.GetArgs()...)...)
	}
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}

	var proxy *sdk.PolicyProxy
	if policyPack {
		// Policy packs run in their own directory and read the stack's configuration from the
		// environment, which the engine only gives an analyzer (ConfigureStack): the proxy answers
		// the engine first, then forwards to the pack once it runs.
		cmd.Dir = dir
		if proxy, stdout, err = sdk.NewPolicyProxy(ctx, stdout); err != nil {
			return fmt.Errorf("starting the policy pack proxy: %w", err)
		}
		cfg, err := proxy.AwaitConfiguration(ctx)
		if err != nil {
			return fmt.Errorf("waiting for the stack configuration: %w", err)
		}
		if cfg != nil {
			setenv := func(k, v string) {
				if v != "" {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
			}
			setenv("PULUMI_ORGANIZATION", cfg.GetOrganization())
			setenv("PULUMI_PROJECT", cfg.GetProject())
			setenv("PULUMI_STACK", cfg.GetStack())
			setenv("PULUMI_DRY_RUN", strconv.FormatBool(cfg.GetDryRun()))
			if cfg.GetConfig() != nil {
				b, err := json.Marshal(cfg.GetConfig())
				if err != nil {
					return err
				}
				setenv("PULUMI_CONFIG", string(b))
			}
		}
	} else {
		cmd.Dir = req.GetPwd()
	}
	cmd.Env = append(cmd.Env, req.GetEnv()...)
	cmd.Stdout, cmd.Stderr = stdout, stderr

	if err := cmd.Start(); err != nil {
		if proxy != nil {
			proxy.Abort(err)
		}
		return fmt.Errorf("starting the plugin: %w", err)
	}
	if proxy != nil {
		err = proxy.Attach(ctx, cmd) // waits for the pack to exit
	} else {
		err = cmd.Wait()
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return server.Send(&pulumirpc.RunPluginResponse{
			Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(exitErr.ExitCode())},
		})
	}
	if err != nil {
		return fmt.Errorf("running the plugin: %w", err)
	}
	return closer.Close()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// hasModule says whether the toolchain's Python can import module (old SDKs lack pulumi.run.plugin).
func hasModule(ctx context.Context, tc toolchain.Toolchain, module string) bool {
	cmd, err := tc.Command(ctx, "-c", "import "+module)
	if err != nil {
		return false
	}
	return cmd.Run() == nil
}
