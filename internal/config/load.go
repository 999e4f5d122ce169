package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultFile is read when no --config is given and it exists.
const DefaultFile = "nanohost.yaml"

// Load reads the configuration: embedded defaults, then the YAML file (path
// "" means nanohost.yaml if present), then a .env file (in the working
// directory; it never overrides variables already set), then environment
// overrides. ${VAR} in YAML values expands from the environment.
func Load(path string) (*Config, error) {
	c := Defaults()
	explicit := path != ""
	if !explicit {
		path = DefaultFile
	}
	if err := loadDotEnv(".env"); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := decode(data, c); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		c.Source = path
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		// Embedded defaults only.
	default:
		return nil, fmt.Errorf("read config: %w", err)
	}
	if err := applyEnv(c, os.LookupEnv); err != nil {
		return nil, err
	}
	c.secretValues = map[string]Secret{}
	for _, name := range c.AgentSecrets {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			c.secretValues[name] = Secret(v)
		}
	}
	return c, nil
}

// decode parses YAML strictly, so a misspelt key is an error with its line.
func decode(data []byte, c *Config) error {
	expanded := os.Expand(string(data), func(name string) string {
		if name == "$" {
			return "$"
		}
		return os.Getenv(name)
	})
	dec := yaml.NewDecoder(bytes.NewReader([]byte(expanded)))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return explainYAML(err)
	}
	return nil
}

// explainYAML turns "field foo not found in type config.Runtime" into a fix.
func explainYAML(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "not found in type") {
		return fmt.Errorf("%s (misspelt key? see nanohost.example.yaml for every setting)", msg)
	}
	return err
}

// envOverrides maps environment variables to setters.
var envOverrides = map[string]func(c *Config, v string) error{
	"NANOHOST_DATA_DIR":       func(c *Config, v string) error { c.DataDir = v; return nil },
	"NANOHOST_DATABASE":       func(c *Config, v string) error { c.Database = v; return nil },
	"NANOHOST_LOG_LEVEL":      func(c *Config, v string) error { c.Log.Level = v; return nil },
	"NANOHOST_LOG_FORMAT":     func(c *Config, v string) error { c.Log.Format = v; return nil },
	"NANOHOST_HTTP_LISTEN":    func(c *Config, v string) error { c.HTTP.Listen = v; return nil },
	"NANOHOST_HTTP_TOKEN":     func(c *Config, v string) error { c.HTTP.Token = Secret(v); return nil },
	"NANOHOST_PUBLIC_URL":     func(c *Config, v string) error { c.HTTP.PublicURL = v; return nil },
	"NANOHOST_IMAGE":          func(c *Config, v string) error { c.Runtime.Image = v; return nil },
	"NANOHOST_AGENT":          func(c *Config, v string) error { c.Runtime.Agent = v; return nil },
	"NANOHOST_AGENT_SCRIPT":   func(c *Config, v string) error { c.Runtime.Script = v; return nil },
	"NANOHOST_MAX_CONTAINERS": func(c *Config, v string) error { return setInt(&c.Runtime.MaxContainers, "NANOHOST_MAX_CONTAINERS", v) },
	"NANOHOST_IDLE_TIMEOUT": func(c *Config, v string) error {
		return setDuration(&c.Runtime.IdleTimeout, "NANOHOST_IDLE_TIMEOUT", v)
	},
	"SLACK_BOT_TOKEN": func(c *Config, v string) error { c.Slack.BotToken = Secret(v); return nil },
	"SLACK_APP_TOKEN": func(c *Config, v string) error { c.Slack.AppToken = Secret(v); return nil },
	"SLACK_API_URL":   func(c *Config, v string) error { c.Slack.APIURL = v; return nil },
}

func applyEnv(c *Config, lookup func(string) (string, bool)) error {
	for name, set := range envOverrides {
		if v, ok := lookup(name); ok && v != "" {
			if err := set(c, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func setInt(dst *int, name, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%s=%q is not an integer", name, v)
	}
	*dst = n
	return nil
}

func setDuration(dst *time.Duration, name, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s=%q is not a duration (e.g. 10m)", name, v)
	}
	*dst = d
	return nil
}

// loadDotEnv sets KEY=VALUE lines from path into the environment, without
// overriding variables that are already set. A missing file is fine.
func loadDotEnv(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		text = strings.TrimPrefix(text, "export ")
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			return fmt.Errorf("%s:%d: want KEY=VALUE", path, line)
		}
		key = strings.TrimSpace(key)
		value = strings.TrimSpace(value)
		if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
			value = value[1 : len(value)-1]
		}
		if _, set := os.LookupEnv(key); !set {
			os.Setenv(key, value)
		}
	}
	return sc.Err()
}
