package agent_test

import (
	"testing"

	"berth/agent/agenttest"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

// TestAgentOnline: the harness's opening: a server, a person, an agent
// that comes online.
func TestAgentOnline(t *testing.T) {
	srv := agenttest.StartServer(t)
	alice := srv.CreatePerson(t, "alice", false)
	a := srv.NewAgent(t, alice)
	a.Start(t)
	id := a.WaitOnline(t)
	if id == 0 {
		t.Fatal("no machine id")
	}
	a.Stop(t)
	a.WaitOffline(t, id)
}
