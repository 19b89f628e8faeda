package redisconn_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/pkg/redisconn"
	"flashsale/tools/testenv"
)

// A redis:// URL carries the password: the client authenticates and
// works; a wrong or missing password fails at New with an error that says
// the credentials were refused and never shows them.
func TestURLAuthenticates(t *testing.T) {
	const password = "s3cret-redis-pass"
	addr := testenv.ThrowawayRedis(t, "--requirepass", password)
	ctx := testenv.Context(t)
	tests := []struct {
		name    string
		setting string
		wantErr bool
	}{
		{"password in the URL", "redis://:" + password + "@" + addr, false},
		{"default user named, database 2", "redis://default:" + password + "@" + addr + "/2", false},
		{"wrong password", "redis://:not-the-password@" + addr, true},
		{"no password", addr, true},
		{"no password, as a URL", "redis://" + addr, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := redisconn.New(tt.setting, rueidis.ClientOption{DisableCache: true, Dialer: net.Dialer{Timeout: 2 * time.Second}})
			if tt.wantErr {
				if err == nil {
					c.Close()
					t.Fatal("connected without the right password")
				}
				if !strings.Contains(err.Error(), "refused the credentials") || !strings.Contains(err.Error(), addr) {
					t.Errorf("error %q does not say the credentials were refused at %s", err, addr)
				}
				if strings.Contains(err.Error(), "not-the-password") || strings.Contains(err.Error(), password) {
					t.Errorf("error %q shows a password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer c.Close()
			key := fmt.Sprintf("redisconn-auth-%d", time.Now().UnixNano())
			if err := c.Do(ctx, c.B().Set().Key(key).Value("1").Build()).Error(); err != nil {
				t.Fatalf("SET after AUTH: %v", err)
			}
			if got, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString(); err != nil || got != "1" {
				t.Fatalf("GET: %q %v", got, err)
			}
		})
	}
}

// The URL's database is selected: a key written through /2 is not in 0.
func TestURLSelectsDatabase(t *testing.T) {
	const password = "another-pass"
	addr := testenv.ThrowawayRedis(t, "--requirepass", password)
	ctx := context.Background()
	db2, err := redisconn.New("redis://:"+password+"@"+addr+"/2", rueidis.ClientOption{DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	db0, err := redisconn.New("redis://:"+password+"@"+addr, rueidis.ClientOption{DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db0.Close()
	if err := db2.Do(ctx, db2.B().Set().Key("k").Value("in-2").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := db0.Do(ctx, db0.B().Get().Key("k").Build()).Error(); !rueidis.IsRedisNil(err) {
		t.Errorf("GET k in database 0: %v, want nil (the key is in 2)", err)
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name    string
		setting string
		check   func(t *testing.T, o rueidis.ClientOption)
		wantErr string
	}{
		{"host:port list", "10.0.0.1:6379,10.0.0.2:6379", func(t *testing.T, o rueidis.ClientOption) {
			if len(o.InitAddress) != 2 || o.Password != "" || o.TLSConfig != nil {
				t.Errorf("%+v", o)
			}
		}, ""},
		{"rediss: TLS with the host as server name", "rediss://user:pw@cache.example:6380?addr=cache2.example:6380", func(t *testing.T, o rueidis.ClientOption) {
			if o.TLSConfig == nil || o.TLSConfig.ServerName != "cache.example" || o.Username != "user" || o.Password != "pw" ||
				strings.Join(o.InitAddress, ",") != "cache.example:6380,cache2.example:6380" {
				t.Errorf("%+v", o)
			}
		}, ""},
		// the base's tuning survives the URL
		{"base kept", "redis://:pw@h:1", func(t *testing.T, o rueidis.ClientOption) {
			if !o.DisableCache || o.ConnWriteTimeout != time.Second {
				t.Errorf("%+v", o)
			}
		}, ""},
		{"other scheme", "http://h:1", nil, "scheme"},
		{"no port", "redis://:pw@h", nil, "port"},
		// a malformed URL's error must not repeat it: it may hold a password
		{"malformed", "redis://:pa ss%zz@h:1", nil, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := redisconn.Options(tt.setting, rueidis.ClientOption{DisableCache: true, ConnWriteTimeout: time.Second})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one about %s", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "pa ss") {
					t.Errorf("error %q repeats the setting", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, o)
		})
	}
}
