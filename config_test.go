package braid

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigZeroIsDefault: &Config{}, a nil *Config and DefaultConfig()
// give sessions with the same configuration in effect, and that is
// DefaultConfig() itself.
func TestConfigZeroIsDefault(t *testing.T) {
	for name, cfg := range map[string]*Config{"&Config{}": {}, "nil": nil, "DefaultConfig()": DefaultConfig()} {
		t.Run(name, func(t *testing.T) {
			client, server := sessionPair(t, cfg)
			for _, s := range []*Session{client, server} {
				if got := *s.Config(); got != *DefaultConfig() {
					t.Errorf("Config in effect:\n%+v\nwant DefaultConfig():\n%+v", got, *DefaultConfig())
				}
			}
		})
	}
}

// TestConfigFieldZeroMeansDefault: for every field of Config, DefaultConfig
// with that field set to its zero value is valid and means DefaultConfig.
// A field added later whose zero value is not its default fails here.
func TestConfigFieldZeroMeansDefault(t *testing.T) {
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			cfg := DefaultConfig()
			reflect.ValueOf(cfg).Elem().Field(i).SetZero()
			if err := cfg.Validate(); err != nil {
				t.Fatalf("zero %s: %v", f.Name, err)
			}
			if got := cfg.withDefaults(); got != *DefaultConfig() {
				t.Errorf("zero %s resolves to %+v, want DefaultConfig()", f.Name, got)
			}
		})
	}
}

// TestDefaultConfigValues: DefaultConfig spells out the documented
// defaults, the same values as before the zero value meant them.
func TestDefaultConfigValues(t *testing.T) {
	want := Config{
		Protocol:               Yamux,
		DisableCoalescing:      false,
		CoalesceDelay:          0,
		MaxBatchBytes:          64 * 1024,
		MaxIncomingStreams:     1000,
		AcceptBacklog:          256,
		MaxUnackedStreams:      256,
		MaxStreamWindow:        16 * 1024 * 1024,
		MaxSessionWindow:       64 * 1024 * 1024,
		MaxReceiveBuffer:       4 * 1024 * 1024,
		MaxReceiveStall:        250 * time.Millisecond,
		DisableKeepAlive:       false,
		KeepAliveInterval:      30 * time.Second,
		ConnectionWriteTimeout: 10 * time.Second,
	}
	if got := *DefaultConfig(); got != want {
		t.Errorf("DefaultConfig() = %+v, want %+v", got, want)
	}
}

// TestSessionConfigIsACopy: changing what Session.Config returns changes
// nothing in the session, nor does changing the Config given to Client.
func TestSessionConfigIsACopy(t *testing.T) {
	cfg := &Config{MaxStreamWindow: 1 << 20}
	client, _ := sessionPair(t, cfg)
	cfg.MaxStreamWindow = 2 << 20
	client.Config().MaxStreamWindow = 4 << 20
	if got := client.Config().MaxStreamWindow; got != 1<<20 {
		t.Errorf("MaxStreamWindow in effect = %d, want 1 MiB", got)
	}
}

// badMemory is a MemoryManager whose methods need a non-nil receiver.
type badMemory struct{ reserved int }

func (m *badMemory) ReserveMemory(size int, _ uint8) error { m.reserved += size; return nil }
func (m *badMemory) ReleaseMemory(size int)                { m.reserved -= size }

// TestConfigBounds: every value just outside a bound is a *ConfigError
// naming the field, and the bound itself is valid.
func TestConfigBounds(t *testing.T) {
	invalid := []struct {
		field string
		set   func(*Config)
	}{
		{"Protocol", func(c *Config) { c.Protocol = 2 }},
		{"Protocol", func(c *Config) { c.Protocol = -1 }},
		{"CoalesceDelay", func(c *Config) { c.CoalesceDelay = -1 }},
		{"CoalesceDelay", func(c *Config) { c.CoalesceDelay = 100*time.Millisecond + 1 }},
		{"CoalesceDelay", func(c *Config) { c.CoalesceDelay = time.Millisecond; c.DisableCoalescing = true }},
		{"MaxBatchBytes", func(c *Config) { c.MaxBatchBytes = -1 }},
		{"MaxBatchBytes", func(c *Config) { c.MaxBatchBytes = 4*1024 - 1 }},
		{"MaxBatchBytes", func(c *Config) { c.MaxBatchBytes = 16*1024*1024 + 1 }},
		{"MaxIncomingStreams", func(c *Config) { c.MaxIncomingStreams = -1 }},
		{"AcceptBacklog", func(c *Config) { c.AcceptBacklog = -1 }},
		{"AcceptBacklog", func(c *Config) { c.AcceptBacklog = 64*1024 + 1 }},
		{"MaxUnackedStreams", func(c *Config) { c.MaxUnackedStreams = -1 }},
		{"MaxStreamWindow", func(c *Config) { c.MaxStreamWindow = InitialStreamWindow - 1 }},
		{"MaxReceiveBuffer", func(c *Config) { c.MaxReceiveBuffer = -1 }},
		{"Memory", func(c *Config) { c.Memory = (*badMemory)(nil) }},
		{"Logger", func(c *Config) { c.Logger = &slog.Logger{} }},
		{"KeepAliveInterval", func(c *Config) { c.KeepAliveInterval = -time.Second }},
		{"ConnectionWriteTimeout", func(c *Config) { c.ConnectionWriteTimeout = -time.Second }},
	}
	for _, tc := range invalid {
		for _, base := range []*Config{{}, DefaultConfig()} {
			cfg := *base
			tc.set(&cfg)
			var ce *ConfigError
			if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("%+v: Validate = %v, want a *ConfigError for %s", cfg, err, tc.field)
			}
			// Client refuses it, and leaves the conn to the caller.
			c1, c2 := tcpPair(t)
			if s, err := Client(c1, &cfg); !errors.As(err, &ce) || s != nil {
				t.Errorf("Client with %s invalid: %v, %v", tc.field, s, err)
			}
			if _, err := c1.Write([]byte{0}); err != nil {
				t.Errorf("conn closed by a failed Client: %v", err)
			}
			c1.Close()
			c2.Close()
		}
	}

	valid := []func(*Config){
		func(c *Config) { c.Protocol = Mplex },
		func(c *Config) { c.CoalesceDelay = 100 * time.Millisecond },
		func(c *Config) { c.DisableCoalescing = true },
		func(c *Config) { c.MaxBatchBytes = 4 * 1024 },
		func(c *Config) { c.MaxBatchBytes = 16 * 1024 * 1024 },
		func(c *Config) { c.MaxIncomingStreams = 1 },
		func(c *Config) { c.AcceptBacklog = 1 },
		func(c *Config) { c.AcceptBacklog = 64 * 1024 },
		func(c *Config) { c.MaxUnackedStreams = 1 },
		func(c *Config) { c.MaxStreamWindow = InitialStreamWindow },
		func(c *Config) { c.MaxStreamWindow = 1<<32 - 1 },
		func(c *Config) { c.MaxReceiveBuffer = 1 },
		func(c *Config) { c.Memory = &badMemory{} },
		func(c *Config) { c.Logger = slog.New(slog.DiscardHandler) },
		func(c *Config) { c.DisableKeepAlive = true; c.KeepAliveInterval = -1 }, // ignored
		func(c *Config) { c.KeepAliveInterval = time.Nanosecond },
		func(c *Config) { c.ConnectionWriteTimeout = time.Nanosecond },
	}
	for _, set := range valid {
		cfg := &Config{}
		set(cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", *cfg, err)
		}
	}
	if err := (*Config)(nil).Validate(); err != nil {
		t.Errorf("nil Config: %v", err)
	}
}

// TestConfigDocsStateBounds: the doc comment of every Config field states
// its default, and the bounds Validate enforces appear both in the field's
// doc and in the error for a value outside them, so a reader of either
// learns the range.
func TestConfigDocsStateBounds(t *testing.T) {
	// field: what its doc must say (bounds and default, as written).
	want := map[string][]string{
		"Protocol":               {"zero value is Yamux"},
		"DisableCoalescing":      {"By default"},
		"CoalesceDelay":          {"default, 0", "100 ms", "DisableCoalescing"},
		"MaxBatchBytes":          {"4 KiB", "16 MiB", "0 means DefaultMaxBatchBytes (64 KiB)"},
		"MaxIncomingStreams":     {"At least 1", "0 means DefaultMaxIncomingStreams (1000)"},
		"AcceptBacklog":          {"1 and 65536", "0 means DefaultAcceptBacklog (256)"},
		"MaxUnackedStreams":      {"At least 1", "0 means DefaultMaxUnackedStreams (256)"},
		"MaxStreamWindow":        {"At least 256 KiB", "0 means DefaultMaxStreamWindow (16 MiB)"},
		"MaxSessionWindow":       {"At least MaxStreamWindow - InitialStreamWindow", "0 means DefaultMaxSessionWindow (64 MiB)"},
		"MaxReceiveBuffer":       {"At least 1", "0 means DefaultMaxReceiveBuffer (4 MiB)"},
		"MaxReceiveStall":        {"negative value is an error", "0 means DefaultMaxReceiveStall (250 ms)"},
		"Memory":                 {"default, nil", "nil pointer"},
		"DisableKeepAlive":       {"By default"},
		"KeepAliveInterval":      {"negative value is an error", "0 means DefaultKeepAliveInterval (30 s)", "Ignored when DisableKeepAlive"},
		"ConnectionWriteTimeout": {"negative value is an error", "0 means DefaultConnectionWriteTimeout (10 s)"},
		"Logger":                 {"default, nil", "without a handler"},
	}
	docs := configFieldDocs(t)
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Config]()) {
		phrases, ok := want[f.Name]
		if !ok {
			t.Errorf("Config.%s: add what its doc must state to this test", f.Name)
			continue
		}
		doc := strings.Join(strings.Fields(docs[f.Name]), " ")
		for _, p := range phrases {
			if !strings.Contains(doc, p) {
				t.Errorf("Config.%s doc does not say %q:\n%s", f.Name, p, doc)
			}
		}
	}

	// The errors name the same bounds.
	errWants := []struct {
		set  func(*Config)
		want []string
	}{
		{func(c *Config) { c.CoalesceDelay = time.Second }, []string{"100ms"}},
		{func(c *Config) { c.MaxBatchBytes = 1 }, []string{"4 KiB", "16 MiB", "64 KiB"}},
		{func(c *Config) { c.AcceptBacklog = 1 << 20 }, []string{"65536", "256"}},
		{func(c *Config) { c.MaxStreamWindow = 1 }, []string{"256 KiB", "16 MiB"}},
		{func(c *Config) { c.MaxIncomingStreams = -1 }, []string{"1000"}},
	}
	for _, tc := range errWants {
		cfg := &Config{}
		tc.set(cfg)
		err := cfg.Validate()
		if err == nil {
			t.Errorf("%+v is valid", *cfg)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q does not name %q", err, w)
			}
		}
	}
}

// configFieldDocs returns the doc comment of each Config field, parsed
// from config.go.
func configFieldDocs(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		for _, field := range ts.Type.(*ast.StructType).Fields.List {
			for _, name := range field.Names {
				docs[name.Name] = field.Doc.Text()
			}
		}
		return false
	})
	if len(docs) == 0 {
		t.Fatal("no Config struct in config.go")
	}
	return docs
}

// TestLongestDurations: every duration of Config without an upper bound
// (CoalesceDelay has one), at its largest value (a user's "never"), is valid and leaves a working session. Before, a
// ConnectionWriteTimeout near math.MaxInt64 plus its slack wrapped to a
// write deadline in the past, and the first write ended the session.
func TestLongestDurations(t *testing.T) {
	const never = time.Duration(math.MaxInt64)
	for name, set := range map[string]func(*Config){
		"MaxReceiveStall":        func(c *Config) { c.MaxReceiveStall = never },
		"KeepAliveInterval":      func(c *Config) { c.KeepAliveInterval = never },
		"ConnectionWriteTimeout": func(c *Config) { c.ConnectionWriteTimeout = never },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			set(cfg)
			require.NoError(t, cfg.Validate())
			_, _, a, b := streamPair(t, cfg)
			_, err := a.Write([]byte("hello"))
			require.NoError(t, err)
			require.NoError(t, b.SetReadDeadline(time.Now().Add(5*time.Second)))
			got := make([]byte, 5)
			_, err = io.ReadFull(b, got)
			require.NoError(t, err)
			require.Equal(t, "hello", string(got))
		})
	}
}
