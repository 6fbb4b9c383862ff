// Site tune files (issue 40 item 1, docs/tune.md "Site tuning"): the `made`
// header (what a file was made on) and the rules by which a job uses it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/tune/stamp.h"
#include "core/tune/tune_file.h"

namespace mlxa2a::core::tune {
namespace {

Stamp here() {
  return {"mlxa2a 0.1.0 (v0.1-5-gabc), built for Open MPI 4.1.4", "Open MPI v4.1.4, package: x",
          "mlx5_0 fw 20.31.1014", Layout{"ompi", 4, 2, 2, false}};
}

TuneFile stamped() {
  TuneFile f;
  f.set_stamp(here());
  f.set(Layout{"ompi", 4, 2, 2, false}, 6, Route::rdma);
  f.set(Layout{"ompi", 2, 1, 2, false}, 3, Route::copy);
  return f;
}

TEST(TuneStamp, RoundTripsThroughTheFile) {
  const TuneFile f = stamped();
  const std::string text = f.format();
  EXPECT_NE(text.find("\nmade build mlxa2a 0.1.0 (v0.1-5-gabc), built for Open MPI 4.1.4\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("\nmade layout mpi=ompi ranks=4 nodes=2 ranks_per_node=2 "
                      "oversubscribed=0\n"), std::string::npos) << text;
  std::string error;
  const auto back = TuneFile::parse(text, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, f);
  ASSERT_TRUE(back->stamp());
  EXPECT_EQ(*back->stamp(), here());
  // Without a stamp: as before, and not equal to the stamped file.
  TuneFile plain;
  plain.set(Layout{"ompi", 4, 2, 2, false}, 6, Route::rdma);
  plain.set(Layout{"ompi", 2, 1, 2, false}, 3, Route::copy);
  EXPECT_EQ(plain.format().find("made "), std::string::npos);
  EXPECT_FALSE(plain == f);
  const auto unstamped = TuneFile::parse(plain.format(), &error);
  ASSERT_TRUE(unstamped) << error;
  EXPECT_FALSE(unstamped->stamp());
}

TEST(TuneStamp, AHeaderIsWholeOrAbsent) {
  const std::string build = "made build b\n", mpi = "made mpi m\n", hca = "made hca none\n",
                    layout = "made layout mpi=ompi ranks=4 nodes=2 ranks_per_node=2 "
                             "oversubscribed=1\n";
  std::string error;
  ASSERT_TRUE(TuneFile::parse(build + mpi + hca + layout, &error)) << error;
  const struct {
    std::string text, why;
  } bad[] = {
      {mpi + hca + layout, "made build missing"},
      {build + mpi + layout, "made hca missing"},
      {build + build + mpi + hca + layout, "made build given twice"},
      {"made build\n" + mpi + hca + layout, "without a value"},
      {build + mpi + hca + layout + "made colour blue\n", "unknown header"},
      {build + mpi + hca + "made layout mpi=ompi ranks=4 nodes=2\n", "field ranks_per_node missing"},
      {build + mpi + hca + "made layout mpi=lam ranks=4 nodes=2 ranks_per_node=2 oversubscribed=0\n",
       "mpi must be"},
  };
  for (const auto& b : bad) {
    error.clear();
    EXPECT_FALSE(TuneFile::parse(b.text, &error)) << b.text;
    EXPECT_NE(error.find(b.why), std::string::npos) << error;
  }
}

TEST(TuneStamp, AFileFitsOnlyWhatItWasMadeOn) {
  EXPECT_EQ(stamp_mismatch(here(), here()), "");
  Stamp other = here();
  other.build = "mlxa2a 0.1.0 (v0.1-6-gdef), built for Open MPI 4.1.4";
  EXPECT_NE(stamp_mismatch(here(), other).find("build: made with 'mlxa2a 0.1.0 (v0.1-5-gabc)"),
            std::string::npos);
  other = here();
  other.mpi = "Open MPI v4.1.5";
  EXPECT_EQ(stamp_mismatch(here(), other).rfind("MPI: ", 0), 0u);
  other = here();
  other.hca = "mlx5_0 fw 20.32.1010";
  EXPECT_NE(stamp_mismatch(here(), other).find("HCA: made with 'mlx5_0 fw 20.31.1014', this job "
                                               "has 'mlx5_0 fw 20.32.1010'"), std::string::npos);
  other = here();
  other.hca = "none";
  EXPECT_NE(stamp_mismatch(here(), other), "");
  for (const Layout& l : {Layout{"ompi", 6, 3, 2, false}, Layout{"ompi", 4, 1, 4, false},
                          Layout{"mpich", 4, 2, 2, false}, Layout{"ompi", 4, 2, 2, true}}) {
    other = here();
    other.layout = l;
    EXPECT_EQ(stamp_mismatch(here(), other).rfind("layout: made with '2 nodes, 2 ranks per node", 0),
              0u) << stamp_mismatch(here(), other);
  }
}

TEST(TuneStamp, ValuesAreOneCommentFreeLine) {
  EXPECT_EQ(stamp_value("  Open MPI v4.1.4,\tpackage:  Debian  \nident: 4.1.4\n"),
            "Open MPI v4.1.4, package: Debian");
  EXPECT_EQ(stamp_value("build #3 of @(#)x"), "build 3 of @( )x");
  EXPECT_EQ(stamp_value(""), "unknown");
  EXPECT_EQ(stamp_value(std::string(1000, 'x')).size(), 256u);
  // What stamp_value gives parses back unchanged.
  Stamp s = here();
  s.mpi = stamp_value("MPICH Version:\t4.0.2 # of 2023");
  TuneFile f;
  f.set_stamp(s);
  std::string error;
  const auto back = TuneFile::parse(f.format(), &error);
  ASSERT_TRUE(back && back->stamp()) << error;
  EXPECT_EQ(back->stamp()->mpi, "MPICH Version: 4.0.2 of 2023");
}

TEST(TuneStamp, HcaIdentityListsDevicesAndFirmware) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("mlxa2a-hca-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  EXPECT_EQ(hca_identity(root.string()), "none");  // no such directory
  std::filesystem::create_directories(root);
  EXPECT_EQ(hca_identity(root.string()), "none");
  std::filesystem::create_directories(root / "mlx5_1");
  std::filesystem::create_directories(root / "mlx5_0");
  std::ofstream(root / "mlx5_0" / "fw_ver") << "20.31.1014\n";
  std::ofstream(root / "mlx5_1" / "fw_ver") << "20.31.1016\n";
  EXPECT_EQ(hca_identity(root.string()), "mlx5_0 fw 20.31.1014; mlx5_1 fw 20.31.1016");
  std::filesystem::remove(root / "mlx5_1" / "fw_ver");
  EXPECT_EQ(hca_identity(root.string()), "mlx5_0 fw 20.31.1014; mlx5_1 fw unknown");
  std::filesystem::remove_all(root);
}

// A stamped file is saved and replaced as safely as any tune file, and a job
// that changes nothing (same stamp, same decisions) leaves it untouched.
TEST(TuneStamp, SavingKeepsTheStampAndWritesOnlyChanges) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("mlxa2a-stamp-" + std::to_string(getpid()) + ".txt")).string();
  std::filesystem::remove(path);
  std::string error;
  ASSERT_TRUE(stamped().save(path, &error)) << error;
  auto loaded = TuneFile::load(path, &error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(*loaded, stamped());
  const auto before = std::filesystem::last_write_time(path);
  ASSERT_TRUE(loaded->save(path, &error)) << error;
  EXPECT_EQ(std::filesystem::last_write_time(path), before);
  Stamp other = here();
  other.hca = "none";
  loaded->set_stamp(other);
  ASSERT_TRUE(loaded->save(path, &error)) << error;
  const auto again = TuneFile::load(path, &error);
  ASSERT_TRUE(again && again->stamp()) << error;
  EXPECT_EQ(again->stamp()->hca, "none");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace mlxa2a::core::tune
