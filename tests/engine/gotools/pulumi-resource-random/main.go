// Command pulumi-resource-random is a STAND-IN for Pulumi's random resource provider plugin.
//
// The real one is the Go module github.com/pulumi/pulumi-random/provider/v4 (a bridge of HashiCorp's
// terraform-provider-random), which the Go module proxy this project can reach does not serve (403
// at every version, and terraform-provider-random isn't served either), and Pulumi's release
// archives can't be downloaded here. The project's program (components/infrastructure/credentials.py)
// uses the pulumi-random Python SDK, which asks the engine for plugin `random` 4.21.4, so without a
// plugin `pulumi preview` of the real program stops at "Could not automatically download and
// install resource plugin 'pulumi-resource-random'". tests/engine/build_go_tools.sh builds this
// one instead, to be put on PATH (the engine runs a pulumi-resource-* binary it finds on PATH).
// It is our own code, written against the ResourceProvider gRPC service of the served
// github.com/pulumi/pulumi/sdk/v3 module of the same release as the CLI: the plugin.Provider
// interface behind plugin.NewProviderServer (which marshals properties, secrets and unknowns) and
// provider.Main (serving, the engine health check, tracing).
//
// What it implements, with pulumi-random's tokens, property names, defaults and secrets:
//   - random:index/randomPassword:RandomPassword: inputs length (required), special, upper, lower,
//     numeric (each defaulting to true), number (deprecated, kept equal to numeric: setting both to
//     different values is refused, setting one sets the other), minLower, minUpper, minNumeric,
//     minSpecial (defaulting to 0), overrideSpecial (replaces the special characters
//     !@#$%&*()-_=+[]{}<>:?) and keepers; outputs those plus result and bcryptHash (a bcrypt hash,
//     default cost, of result's first 72 bytes), both secret. The ID is "none", as upstream's. The
//     password is drawn with crypto/rand as upstream draws it: min* characters from each class
//     (even a class switched off, as upstream does), the rest from the classes switched on, then
//     shuffled. Check refuses, with upstream's rules: length < 1, a negative min*, length below the
//     sum of the min*, number and numeric set to different values.
//   - random:index/randomBytes:RandomBytes: inputs length (required, at least 1) and keepers;
//     outputs those plus base64 and hex of length crypto/rand bytes, both secret. The ID is the
//     base64 value, as upstream's (pulumi-random's ComputeID; the ID itself isn't secret there
//     either).
//   - Check validates types, unknown and missing properties and the rules above, reporting
//     failures by property, and returns the inputs as given (defaults apply to the outputs).
//   - Diff compares the new inputs, defaults applied, with the old state's: every input of these
//     resources forces a new value, as upstream (RequiresReplace), so any difference, or an
//     unknown new value, is a replacement (create before delete); else no change. An absent and
//     an empty keepers are the same, as are an absent and an empty overrideSpecial.
//   - Create generates the values; in a preview it returns them unknown. Read returns the state
//     as it is (nothing exists outside the state, as upstream); with no state it imports, as
//     upstream: a RandomPassword from its value as the ID (length from it, the rest the defaults),
//     a RandomBytes from its base64 as the ID. Update only echoes (Diff never asks for one),
//     Delete does nothing.
//   - Handshake, CheckConfig, DiffConfig, Configure (the provider has no configuration),
//     GetPluginInfo (the version the build stamps: 4.21.4+standin.<hash of this source>, build
//     metadata so that it compares equal to the 4.21.4 the SDK asks for),
//     GetSchema (a schema of these two resources: tokens, properties, types, secrets, required,
//     defaults; no examples or language sections), GetMapping(s) (none).
//
// What it does not implement: the other resources of pulumi-random (RandomId, RandomInteger,
// RandomPet, RandomShuffle, RandomString, RandomUuid; Check names them as not in this stand-in),
// upstream's state upgrades from older pulumi-random state versions, Invoke (upstream has no
// functions either), Construct, Call, Parameterize and List (Unimplemented). The character
// classes are Unicode code points where upstream's are bytes (the same for ASCII, which every
// default class is), and a password with every class off and characters beyond the min* to draw
// is refused by Check, where upstream fails in Create.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/provider"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"golang.org/x/crypto/bcrypt"
)

// version is stamped by tests/engine/build_go_tools.sh (-X main.version=...).
var version = "4.21.4+standin.dev"

const providerName = "random"

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(version)
		return
	}
	if err := provider.Main(providerName, func(*provider.HostClient) (pulumirpc.ResourceProviderServer, error) {
		return plugin.NewProviderServer(&randomProvider{}), nil
	}); err != nil {
		cmdutil.ExitError(err.Error())
	}
}

// --- the two resource types, described once for Check, Diff, Create and GetSchema.

type kind int

const (
	kindInteger kind = iota
	kindBoolean
	kindString
	kindStringMap
)

type property struct {
	name        resource.PropertyKey
	kind        kind
	description string
	input       bool                   // an input (and, like every input, an output too)
	required    bool                   // a required input
	secret      bool                   // an output upstream marks secret
	def         resource.PropertyValue // an optional input's default (null: none)
	emptyIsNull bool                   // an empty value means the same as none (keepers, overrideSpecial)
	deprecation string
}

type resourceType struct {
	token       string
	description string
	properties  []property
	// normalize fills in what depends on other inputs (number/numeric), before the defaults.
	normalize func(raw, eff resource.PropertyMap)
	// validate checks the known values of the inputs, defaults applied (raw: as given).
	validate func(raw, eff resource.PropertyMap) []plugin.CheckFailure
	// generate makes the outputs that aren't inputs (all secret) from the inputs, defaults applied.
	generate func(eff resource.PropertyMap) (resource.PropertyMap, error)
	// id is the resource's ID, from its outputs (plain values).
	id func(outs resource.PropertyMap) resource.ID
	// importID makes the plain outputs of a resource imported with this ID.
	importID func(id resource.ID) (resource.PropertyMap, error)
}

func (rt *resourceType) name() string { return rt.token[strings.LastIndex(rt.token, ":")+1:] }

func (rt *resourceType) property(k resource.PropertyKey) *property {
	for i := range rt.properties {
		if rt.properties[i].name == k {
			return &rt.properties[i]
		}
	}
	return nil
}

func (rt *resourceType) inputs() []property {
	var in []property
	for _, p := range rt.properties {
		if p.input {
			in = append(in, p)
		}
	}
	return in
}

const keepersDescription = "Arbitrary map of values that, when changed, will trigger recreation of resource."

const (
	lowerChars   = "abcdefghijklmnopqrstuvwxyz"
	upperChars   = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	numericChars = "0123456789"
	specialChars = "!@#$%&*()-_=+[]{}<>:?"
)

var (
	trueValue = resource.NewBoolProperty(true)
	zeroValue = resource.NewNumberProperty(0)
)

var randomPassword = &resourceType{
	token: "random:index/randomPassword:RandomPassword",
	description: "Generates a random password (a secret) of the given length and character classes, " +
		"drawn with a cryptographic random number generator. (pulumi-resource-random stand-in.)",
	properties: []property{
		{name: "bcryptHash", kind: kindString, secret: true,
			description: "A bcrypt hash of the generated random string (of its first 72 bytes if longer)."},
		{name: "keepers", kind: kindStringMap, input: true, emptyIsNull: true, description: keepersDescription},
		{name: "length", kind: kindInteger, input: true, required: true,
			description: "The length of the string desired. The minimum value for length is 1 and, length must " +
				"also be >= (`minUpper` + `minLower` + `minNumeric` + `minSpecial`)."},
		{name: "lower", kind: kindBoolean, input: true, def: trueValue,
			description: "Include lowercase alphabet characters in the result. Default value is `true`."},
		{name: "minLower", kind: kindInteger, input: true, def: zeroValue,
			description: "Minimum number of lowercase alphabet characters in the result. Default value is `0`."},
		{name: "minNumeric", kind: kindInteger, input: true, def: zeroValue,
			description: "Minimum number of numeric characters in the result. Default value is `0`."},
		{name: "minSpecial", kind: kindInteger, input: true, def: zeroValue,
			description: "Minimum number of special characters in the result. Default value is `0`."},
		{name: "minUpper", kind: kindInteger, input: true, def: zeroValue,
			description: "Minimum number of uppercase alphabet characters in the result. Default value is `0`."},
		{name: "number", kind: kindBoolean, input: true, def: trueValue,
			deprecation: "**NOTE**: This is deprecated, use `numeric` instead.",
			description: "Include numeric characters in the result. Default value is `true`. " +
				"**NOTE**: This is deprecated, use `numeric` instead."},
		{name: "numeric", kind: kindBoolean, input: true, def: trueValue,
			description: "Include numeric characters in the result. Default value is `true`."},
		{name: "overrideSpecial", kind: kindString, input: true, emptyIsNull: true,
			description: "Supply your own list of special characters to use for string generation. This " +
				"overrides the default character list in the special argument. The `special` argument must " +
				"still be set to true for any overwritten characters to be used in generation."},
		{name: "result", kind: kindString, secret: true, description: "The generated random string."},
		{name: "special", kind: kindBoolean, input: true, def: trueValue,
			description: "Include special characters in the result. These are `" + specialChars +
				"`. Default value is `true`."},
		{name: "upper", kind: kindBoolean, input: true, def: trueValue,
			description: "Include uppercase alphabet characters in the result. Default value is `true`."},
	},
	normalize: func(raw, eff resource.PropertyMap) {
		// number and numeric are kept equal: one that is set sets the other.
		number, numeric := known(raw["number"]), known(raw["numeric"])
		switch {
		case isNull(number) && !isNull(numeric):
			eff["number"] = numeric
		case !isNull(number) && isNull(numeric):
			eff["numeric"] = number
		}
	},
	validate: func(raw, eff resource.PropertyMap) []plugin.CheckFailure {
		var failures []plugin.CheckFailure
		number, numeric := known(raw["number"]), known(raw["numeric"])
		if number.IsBool() && numeric.IsBool() && number.BoolValue() != numeric.BoolValue() {
			failures = append(failures, plugin.CheckFailure{Property: "number",
				Reason: "Number and numeric are both configured with different values: number is deprecated, " +
					"use numeric instead"})
		}
		sum, sumKnown := 0.0, true
		for _, k := range []resource.PropertyKey{"minUpper", "minLower", "minNumeric", "minSpecial"} {
			v := known(eff[k])
			if !v.IsNumber() {
				sumKnown = false
				continue
			}
			if v.NumberValue() < 0 {
				failures = append(failures, plugin.CheckFailure{Property: k,
					Reason: fmt.Sprintf("Attribute %s value must be at least 0, got: %d", k, int64(v.NumberValue()))})
			}
			sum += v.NumberValue()
		}
		length := known(eff["length"])
		if !length.IsNumber() {
			return failures
		}
		if length.NumberValue() < 1 {
			failures = append(failures, plugin.CheckFailure{Property: "length",
				Reason: fmt.Sprintf("Attribute length value must be at least 1, got: %d", int64(length.NumberValue()))})
		} else if sumKnown && length.NumberValue() < sum {
			failures = append(failures, plugin.CheckFailure{Property: "length",
				Reason: fmt.Sprintf("Attribute length value must be at least sum of minUpper + minLower + "+
					"minNumeric + minSpecial (%d), got: %d", int64(sum), int64(length.NumberValue()))})
		} else if sumKnown && length.NumberValue() > sum {
			anyOn, allKnown := false, true
			for _, k := range []resource.PropertyKey{"upper", "lower", "numeric", "special"} {
				v := known(eff[k])
				allKnown = allKnown && v.IsBool()
				anyOn = anyOn || (v.IsBool() && v.BoolValue())
			}
			if allKnown && !anyOn {
				failures = append(failures, plugin.CheckFailure{Property: "length",
					Reason: "upper, lower, numeric and special are all false, so there are no characters to draw " +
						"beyond the minimums: set one of them to true"})
			}
		}
		return failures
	},
	generate: func(eff resource.PropertyMap) (resource.PropertyMap, error) {
		special := specialChars
		if o := eff["overrideSpecial"]; o.IsString() && o.StringValue() != "" {
			special = o.StringValue()
		}
		result, err := generatePassword(int(eff["length"].NumberValue()), []charClass{
			{upperChars, eff["upper"].BoolValue(), int(eff["minUpper"].NumberValue())},
			{lowerChars, eff["lower"].BoolValue(), int(eff["minLower"].NumberValue())},
			{numericChars, eff["numeric"].BoolValue(), int(eff["minNumeric"].NumberValue())},
			{special, eff["special"].BoolValue(), int(eff["minSpecial"].NumberValue())},
		})
		if err != nil {
			return nil, err
		}
		hash, err := bcryptHash(result)
		if err != nil {
			return nil, err
		}
		return resource.PropertyMap{
			"result":     resource.NewStringProperty(result),
			"bcryptHash": resource.NewStringProperty(hash),
		}, nil
	},
	id: func(resource.PropertyMap) resource.ID { return "none" },
	importID: func(id resource.ID) (resource.PropertyMap, error) {
		result := string(id)
		if result == "" {
			return nil, errors.New("importing a RandomPassword needs its value as the ID")
		}
		hash, err := bcryptHash(result)
		if err != nil {
			return nil, err
		}
		return resource.PropertyMap{
			"result":     resource.NewStringProperty(result),
			"bcryptHash": resource.NewStringProperty(hash),
			"length":     resource.NewNumberProperty(float64(utf8.RuneCountInString(result))),
		}, nil
	},
}

var randomBytes = &resourceType{
	token: "random:index/randomBytes:RandomBytes",
	description: "Generates random bytes that are intended to be used as a secret, or key, drawn with a " +
		"cryptographic random number generator. (pulumi-resource-random stand-in.)",
	properties: []property{
		{name: "base64", kind: kindString, secret: true,
			description: "The generated bytes presented in base64 string format."},
		{name: "hex", kind: kindString, secret: true,
			description: "The generated bytes presented in lowercase hexadecimal string format. The length of " +
				"the encoded string is exactly twice the `length` parameter."},
		{name: "keepers", kind: kindStringMap, input: true, emptyIsNull: true, description: keepersDescription},
		{name: "length", kind: kindInteger, input: true, required: true,
			description: "The number of bytes requested. The minimum value for length is 1."},
	},
	validate: func(raw, eff resource.PropertyMap) []plugin.CheckFailure {
		if length := known(eff["length"]); length.IsNumber() && length.NumberValue() < 1 {
			return []plugin.CheckFailure{{Property: "length",
				Reason: fmt.Sprintf("Attribute length value must be at least 1, got: %d", int64(length.NumberValue()))}}
		}
		return nil
	},
	generate: func(eff resource.PropertyMap) (resource.PropertyMap, error) {
		b := make([]byte, int(eff["length"].NumberValue()))
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("generating random bytes: %w", err)
		}
		return resource.PropertyMap{
			"base64": resource.NewStringProperty(base64.StdEncoding.EncodeToString(b)),
			"hex":    resource.NewStringProperty(hex.EncodeToString(b)),
		}, nil
	},
	id: func(outs resource.PropertyMap) resource.ID {
		if b := outs["base64"]; b.IsString() {
			return resource.ID(b.StringValue())
		}
		return ""
	},
	importID: func(id resource.ID) (resource.PropertyMap, error) {
		b, err := base64.StdEncoding.DecodeString(string(id))
		if err != nil {
			return nil, fmt.Errorf("importing a RandomBytes needs its value in base64 as the ID: %w", err)
		}
		if len(b) == 0 {
			return nil, errors.New("importing a RandomBytes needs at least one byte")
		}
		return resource.PropertyMap{
			"base64": resource.NewStringProperty(string(id)),
			"hex":    resource.NewStringProperty(hex.EncodeToString(b)),
			"length": resource.NewNumberProperty(float64(len(b))),
		}, nil
	},
}

var resourceTypes = map[string]*resourceType{
	randomPassword.token: randomPassword,
	randomBytes.token:    randomBytes,
}

// The other resources of pulumi-random, which this stand-in doesn't have.
var notInStandIn = []string{"RandomId", "RandomInteger", "RandomPet", "RandomShuffle", "RandomString", "RandomUuid"}

func lookup(typ string) (*resourceType, error) {
	if rt, ok := resourceTypes[typ]; ok {
		return rt, nil
	}
	for _, n := range notInStandIn {
		if strings.HasSuffix(typ, ":"+n) {
			return nil, fmt.Errorf("%s is a resource of pulumi-random that this stand-in provider "+
				"(pulumi-resource-random %s) does not implement; it has RandomPassword and RandomBytes", typ, version)
		}
	}
	return nil, fmt.Errorf("unknown resource type %q: the random provider (stand-in %s) has %s and %s",
		typ, version, randomPassword.token, randomBytes.token)
}

// --- property values

// plain strips secret and output wrappers; an unknown output becomes a computed value.
func plain(v resource.PropertyValue) resource.PropertyValue {
	switch {
	case v.IsSecret():
		return plain(v.SecretValue().Element)
	case v.IsOutput():
		o := v.OutputValue()
		if !o.Known {
			return resource.MakeComputed(resource.NewStringProperty(""))
		}
		return plain(o.Element)
	case v.IsObject():
		m := resource.PropertyMap{}
		for k, e := range v.ObjectValue() {
			m[k] = plain(e)
		}
		return resource.NewObjectProperty(m)
	case v.IsArray():
		a := make([]resource.PropertyValue, len(v.ArrayValue()))
		for i, e := range v.ArrayValue() {
			a[i] = plain(e)
		}
		return resource.NewArrayProperty(a)
	}
	return v
}

// known is plain(v), or null if it isn't wholly known.
func known(v resource.PropertyValue) resource.PropertyValue {
	v = plain(v)
	if v.ContainsUnknowns() {
		return resource.NewNullProperty()
	}
	return v
}

func isNull(v resource.PropertyValue) bool { return v.IsNull() }

// isEmpty: null, or (for keepers and overrideSpecial) an empty map or string.
func (p *property) isEmpty(v resource.PropertyValue) bool {
	v = plain(v)
	switch {
	case v.IsNull():
		return true
	case p.emptyIsNull && v.IsObject():
		return len(v.ObjectValue()) == 0
	case p.emptyIsNull && v.IsString():
		return v.StringValue() == ""
	}
	return false
}

// effective is the plain inputs of m with the defaults applied.
func effective(rt *resourceType, m resource.PropertyMap) resource.PropertyMap {
	eff := resource.PropertyMap{}
	for _, p := range rt.inputs() {
		if v, ok := m[p.name]; ok && !plain(v).IsNull() {
			eff[p.name] = plain(v)
		}
	}
	if rt.normalize != nil {
		rt.normalize(m, eff)
	}
	for _, p := range rt.inputs() {
		if _, ok := eff[p.name]; !ok && !p.def.IsNull() {
			eff[p.name] = p.def
		}
	}
	return eff
}

func (p *property) checkKind(v resource.PropertyValue) string {
	v = plain(v)
	if v.IsNull() || v.IsComputed() {
		return ""
	}
	switch p.kind {
	case kindInteger:
		if !v.IsNumber() {
			return fmt.Sprintf("%s must be an integer, not %s", p.name, v.TypeString())
		}
		if n := v.NumberValue(); n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return fmt.Sprintf("%s must be an integer, not %v", p.name, n)
		}
	case kindBoolean:
		if !v.IsBool() {
			return fmt.Sprintf("%s must be a boolean, not %s", p.name, v.TypeString())
		}
	case kindString:
		if !v.IsString() {
			return fmt.Sprintf("%s must be a string, not %s", p.name, v.TypeString())
		}
	case kindStringMap:
		if !v.IsObject() {
			return fmt.Sprintf("%s must be a map of strings, not %s", p.name, v.TypeString())
		}
		for k, e := range v.ObjectValue() {
			if !e.IsString() && !e.IsComputed() {
				return fmt.Sprintf("%s.%s must be a string, not %s", p.name, k, e.TypeString())
			}
		}
	}
	return ""
}

// --- generation

type charClass struct {
	chars string
	on    bool // drawn from for the characters beyond the minimums
	min   int  // drawn from for this many characters, even if not on (as upstream)
}

func randomIndex(n int) (int, error) {
	i, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		return 0, fmt.Errorf("generating a random password: %w", err)
	}
	return int(i.Int64()), nil
}

func generatePassword(length int, classes []charClass) (string, error) {
	var pool []rune
	out := make([]rune, 0, length)
	for _, c := range classes {
		chars := []rune(c.chars)
		if c.on {
			pool = append(pool, chars...)
		}
		for range c.min {
			i, err := randomIndex(len(chars))
			if err != nil {
				return "", err
			}
			out = append(out, chars[i])
		}
	}
	for len(out) < length {
		if len(pool) == 0 {
			return "", errors.New("no character class is enabled to draw the password from")
		}
		i, err := randomIndex(len(pool))
		if err != nil {
			return "", err
		}
		out = append(out, pool[i])
	}
	for i := len(out) - 1; i > 0; i-- { // Fisher-Yates, so the minimums aren't all in front
		j, err := randomIndex(i + 1)
		if err != nil {
			return "", err
		}
		out[i], out[j] = out[j], out[i]
	}
	return string(out), nil
}

func bcryptHash(s string) (string, error) {
	b := []byte(s)
	if len(b) > 72 { // bcrypt's limit; upstream hashes the first 72 bytes
		b = b[:72]
	}
	h, err := bcrypt.GenerateFromPassword(b, bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hashing the password: %w", err)
	}
	return string(h), nil
}

// --- the provider

type randomProvider struct {
	plugin.UnimplementedProvider
}

var _ plugin.Provider = (*randomProvider)(nil)

func (p *randomProvider) Close() error { return nil }

func (p *randomProvider) SignalCancellation(context.Context) error { return nil }

func (p *randomProvider) Handshake(
	context.Context, plugin.ProviderHandshakeRequest,
) (*plugin.ProviderHandshakeResponse, error) {
	return &plugin.ProviderHandshakeResponse{AcceptSecrets: true, AcceptResources: true}, nil
}

func (p *randomProvider) GetPluginInfo(context.Context) (plugin.PluginInfo, error) {
	v, err := semver.ParseTolerant(version)
	if err != nil {
		return plugin.PluginInfo{}, fmt.Errorf("the stand-in's version %q: %w", version, err)
	}
	return plugin.PluginInfo{Version: &v}, nil
}

func (p *randomProvider) CheckConfig(
	_ context.Context, req plugin.CheckConfigRequest,
) (plugin.CheckConfigResponse, error) {
	return plugin.CheckConfigResponse{Properties: req.News}, nil
}

func (p *randomProvider) DiffConfig(context.Context, plugin.DiffConfigRequest) (plugin.DiffConfigResponse, error) {
	return plugin.DiffResult{Changes: plugin.DiffNone}, nil
}

func (p *randomProvider) Configure(context.Context, plugin.ConfigureRequest) (plugin.ConfigureResponse, error) {
	return plugin.ConfigureResponse{}, nil
}

func (p *randomProvider) GetMapping(context.Context, plugin.GetMappingRequest) (plugin.GetMappingResponse, error) {
	return plugin.GetMappingResponse{}, nil
}

func (p *randomProvider) GetMappings(
	context.Context, plugin.GetMappingsRequest,
) (plugin.GetMappingsResponse, error) {
	return plugin.GetMappingsResponse{}, nil
}

func (p *randomProvider) Invoke(_ context.Context, req plugin.InvokeRequest) (plugin.InvokeResponse, error) {
	return plugin.InvokeResponse{}, fmt.Errorf("unknown function %q: the random provider has no functions", req.Tok)
}

func (p *randomProvider) Check(_ context.Context, req plugin.CheckRequest) (plugin.CheckResponse, error) {
	rt, err := lookup(string(req.Type))
	if err != nil {
		return plugin.CheckResponse{}, err
	}
	var failures []plugin.CheckFailure
	for _, k := range req.News.StableKeys() {
		prop := rt.property(k)
		if prop == nil || !prop.input {
			var names []string
			for _, in := range rt.inputs() {
				names = append(names, string(in.name))
			}
			failures = append(failures, plugin.CheckFailure{Property: k, Reason: fmt.Sprintf(
				"%s has no input %q; its inputs are %s", rt.name(), k, strings.Join(names, ", "))})
			continue
		}
		if reason := prop.checkKind(req.News[k]); reason != "" {
			failures = append(failures, plugin.CheckFailure{Property: k, Reason: reason})
		}
	}
	for _, in := range rt.inputs() {
		if v, ok := req.News[in.name]; in.required && (!ok || v.IsNull()) {
			failures = append(failures, plugin.CheckFailure{Property: in.name,
				Reason: fmt.Sprintf("Missing required property '%s'", in.name)})
		}
	}
	if len(failures) == 0 && rt.validate != nil {
		failures = rt.validate(req.News, effective(rt, req.News))
	}
	return plugin.CheckResponse{Properties: req.News, Failures: failures}, nil
}

func (p *randomProvider) Diff(_ context.Context, req plugin.DiffRequest) (plugin.DiffResponse, error) {
	rt, err := lookup(string(req.Type))
	if err != nil {
		return plugin.DiffResponse{}, err
	}
	oldSource := req.OldOutputs
	if len(oldSource) == 0 {
		oldSource = req.OldInputs
	}
	olds, news := effective(rt, oldSource), effective(rt, req.NewInputs)
	var replaces []resource.PropertyKey
	detailed := map[string]plugin.PropertyDiff{}
	for _, in := range rt.inputs() {
		o, n := olds[in.name], news[in.name]
		oldEmpty, newEmpty := in.isEmpty(o), in.isEmpty(n)
		if !n.ContainsUnknowns() && (o.DeepEquals(n) || (oldEmpty && newEmpty)) {
			continue
		}
		kind := plugin.DiffUpdateReplace
		switch {
		case oldEmpty && !newEmpty:
			kind = plugin.DiffAddReplace
		case !oldEmpty && newEmpty:
			kind = plugin.DiffDeleteReplace
		}
		replaces = append(replaces, in.name)
		detailed[string(in.name)] = plugin.PropertyDiff{Kind: kind, InputDiff: true}
	}
	if len(replaces) == 0 {
		return plugin.DiffResult{Changes: plugin.DiffNone}, nil
	}
	return plugin.DiffResult{
		Changes:      plugin.DiffSome,
		ReplaceKeys:  replaces,
		ChangedKeys:  replaces,
		DetailedDiff: detailed,
	}, nil
}

// outputs are the inputs as given (secret ones stay secret), or their defaults, plus generated.
func outputs(rt *resourceType, inputs, eff, generated resource.PropertyMap) resource.PropertyMap {
	outs := resource.PropertyMap{}
	for _, in := range rt.inputs() {
		if v, ok := inputs[in.name]; ok && !v.IsNull() {
			outs[in.name] = v
		} else if v, ok := eff[in.name]; ok {
			outs[in.name] = v
		}
	}
	for _, prop := range rt.properties {
		if prop.input {
			continue
		}
		if v, ok := generated[prop.name]; ok {
			if prop.secret && !v.IsSecret() && !v.IsComputed() {
				v = resource.MakeSecret(v)
			}
			outs[prop.name] = v
		}
	}
	return outs
}

func (p *randomProvider) Create(_ context.Context, req plugin.CreateRequest) (plugin.CreateResponse, error) {
	rt, err := lookup(string(req.Type))
	if err != nil {
		return plugin.CreateResponse{}, err
	}
	eff := effective(rt, req.Properties)
	generated := resource.PropertyMap{}
	if req.Preview {
		for _, prop := range rt.properties {
			if !prop.input {
				generated[prop.name] = resource.MakeComputed(resource.NewStringProperty(""))
			}
		}
		return plugin.CreateResponse{Properties: outputs(rt, req.Properties, eff, generated)}, nil
	}
	if resource.NewObjectProperty(eff).ContainsUnknowns() {
		return plugin.CreateResponse{}, fmt.Errorf("creating %s: its inputs are not all known", req.URN)
	}
	if generated, err = rt.generate(eff); err != nil {
		return plugin.CreateResponse{}, err
	}
	outs := outputs(rt, req.Properties, eff, generated)
	return plugin.CreateResponse{ID: rt.id(generated), Properties: outs, Status: resource.StatusOK}, nil
}

func (p *randomProvider) Read(_ context.Context, req plugin.ReadRequest) (plugin.ReadResponse, error) {
	rt, err := lookup(string(req.Type))
	if err != nil {
		return plugin.ReadResponse{}, err
	}
	if len(req.State) > 0 {
		// The values exist nowhere but in the state: it is what there is.
		return plugin.ReadResponse{ReadResult: plugin.ReadResult{
			ID: req.ID, Inputs: req.Inputs, Outputs: req.State,
		}}, nil
	}
	// An import: the ID carries the value.
	imported, err := rt.importID(req.ID)
	if err != nil {
		return plugin.ReadResponse{}, err
	}
	inputs := resource.PropertyMap{}
	for _, in := range rt.inputs() {
		if v, ok := imported[in.name]; ok {
			inputs[in.name] = v
		}
	}
	eff := effective(rt, inputs)
	for _, in := range rt.inputs() {
		if v, ok := eff[in.name]; ok {
			inputs[in.name] = v
		}
	}
	outs := outputs(rt, inputs, eff, imported)
	return plugin.ReadResponse{ReadResult: plugin.ReadResult{
		ID: rt.id(imported), Inputs: inputs, Outputs: outs,
	}}, nil
}

func (p *randomProvider) Update(_ context.Context, req plugin.UpdateRequest) (plugin.UpdateResponse, error) {
	rt, err := lookup(string(req.Type))
	if err != nil {
		return plugin.UpdateResponse{}, err
	}
	// Every input forces a replacement, so Diff never asks for an update that changes anything.
	generated := resource.PropertyMap{}
	for _, prop := range rt.properties {
		if v, ok := req.OldOutputs[prop.name]; ok && !prop.input {
			generated[prop.name] = v
		}
	}
	return plugin.UpdateResponse{
		Properties: outputs(rt, req.NewInputs, effective(rt, req.NewInputs), generated),
		Status:     resource.StatusOK,
	}, nil
}

func (p *randomProvider) Delete(context.Context, plugin.DeleteRequest) (plugin.DeleteResponse, error) {
	return plugin.DeleteResponse{}, nil
}

// --- schema

func (p *randomProvider) GetSchema(_ context.Context, req plugin.GetSchemaRequest) (plugin.GetSchemaResponse, error) {
	if req.SubpackageName != "" {
		return plugin.GetSchemaResponse{}, fmt.Errorf("the random provider has no subpackage %q", req.SubpackageName)
	}
	b, err := schema()
	return plugin.GetSchemaResponse{Schema: b}, err
}

type schemaProperty struct {
	Type                 string          `json:"type"`
	AdditionalProperties *schemaProperty `json:"additionalProperties,omitempty"`
	Description          string          `json:"description,omitempty"`
	Secret               bool            `json:"secret,omitempty"`
	Default              any             `json:"default,omitempty"`
	DeprecationMessage   string          `json:"deprecationMessage,omitempty"`
}

type schemaResource struct {
	Description     string                    `json:"description"`
	Properties      map[string]schemaProperty `json:"properties"`
	Required        []string                  `json:"required"`
	InputProperties map[string]schemaProperty `json:"inputProperties"`
	RequiredInputs  []string                  `json:"requiredInputs"`
	StateInputs     map[string]any            `json:"stateInputs"`
}

func schemaOf(p property) schemaProperty {
	sp := schemaProperty{Description: p.description, Secret: p.secret, DeprecationMessage: p.deprecation}
	switch p.kind {
	case kindInteger:
		sp.Type = "integer"
	case kindBoolean:
		sp.Type = "boolean"
	case kindString:
		sp.Type = "string"
	case kindStringMap:
		sp.Type = "object"
		sp.AdditionalProperties = &schemaProperty{Type: "string"}
	}
	return sp
}

func schema() ([]byte, error) {
	resources := map[string]schemaResource{}
	for token, rt := range resourceTypes {
		r := schemaResource{
			Description:     rt.description,
			Properties:      map[string]schemaProperty{},
			InputProperties: map[string]schemaProperty{},
			Required:        []string{},
			RequiredInputs:  []string{},
		}
		state := map[string]schemaProperty{}
		for _, prop := range rt.properties {
			sp := schemaOf(prop)
			r.Properties[string(prop.name)] = sp
			state[string(prop.name)] = sp
			// Always in the outputs: what is generated, required or defaulted.
			if !prop.input || prop.required || !prop.def.IsNull() {
				r.Required = append(r.Required, string(prop.name))
			}
			if prop.input {
				in := sp
				if !prop.def.IsNull() {
					in.Default = prop.def.Mappable()
				}
				r.InputProperties[string(prop.name)] = in
				if prop.required {
					r.RequiredInputs = append(r.RequiredInputs, string(prop.name))
				}
			}
		}
		sort.Strings(r.Required)
		r.StateInputs = map[string]any{
			"description": fmt.Sprintf("Input properties used for looking up and filtering %s resources.", rt.name()),
			"properties":  state,
			"type":        "object",
		}
		resources[token] = r
	}
	return json.MarshalIndent(map[string]any{
		"name":        providerName,
		"displayName": "random",
		"version":     version,
		"description": "A Pulumi package to safely use randomness in Pulumi programs " +
			"(pulumi-resource-random stand-in: RandomPassword and RandomBytes only).",
		"keywords":   []string{"pulumi", "random"},
		"license":    "Apache-2.0",
		"repository": "https://github.com/pulumi/pulumi-random",
		"meta":       map[string]string{"moduleFormat": "(.*)(?:/[^/]*)"},
		"config":     map[string]any{},
		"provider": map[string]any{
			"description": "The provider type for the random package.",
		},
		"resources": resources,
	}, "", "    ")
}
