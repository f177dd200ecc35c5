// fs/front_matter: a SKILL.md's YAML block cut from its body, as the skills routes read it.
#include "fs/front_matter.hpp"

#include <gtest/gtest.h>

namespace agentbox {
namespace {

TEST(FsFrontMatter, SplitsFieldsFromTheBody) {
  FrontMatter fm = split_front_matter("---\nname: pdf\ndescription: Fill PDF forms.\n---\n\n# PDF\nUse it.\n");
  EXPECT_TRUE(fm.present);
  EXPECT_TRUE(fm.valid);
  EXPECT_EQ(fm.fields["name"], "pdf");
  EXPECT_EQ(fm.fields["description"], "Fill PDF forms.");
  EXPECT_EQ(fm.body, "# PDF\nUse it.\n");
}

TEST(FsFrontMatter, ReadsYamlQuotingAndBlocks) {
  FrontMatter fm = split_front_matter(
      "---\r\nname: \"a: b\"\r\ndescription: >\r\n  folded\r\n  lines\r\nother: 'it''s'\r\n---\r\nbody");
  EXPECT_TRUE(fm.valid);
  EXPECT_EQ(fm.fields["name"], "a: b");
  EXPECT_EQ(fm.fields["description"], "folded lines\n");
  EXPECT_EQ(fm.fields["other"], "it's");
  EXPECT_EQ(fm.body, "body");
}

TEST(FsFrontMatter, SkipsNestedValuesButKeepsTheKeysAfterThem) {
  FrontMatter fm = split_front_matter(
      "---\nname: x\nmetadata:\n  tags: [a, b]\n  owner: {team: t}\nallowed-tools: [Bash]\ndescription: d\n---\n");
  EXPECT_TRUE(fm.valid);
  EXPECT_EQ(fm.fields.size(), 2u);
  EXPECT_EQ(fm.fields["name"], "x");
  EXPECT_EQ(fm.fields["description"], "d");
  EXPECT_EQ(fm.body, "");
}

TEST(FsFrontMatter, WithoutABlockTheWholeTextIsTheBody) {
  EXPECT_FALSE(split_front_matter("# Title\n---\nname: x\n---\n").present);
  EXPECT_EQ(split_front_matter("# Title\n").body, "# Title\n");
  FrontMatter open = split_front_matter("---\nname: x\nno end\n");  // never closed
  EXPECT_FALSE(open.present);
  EXPECT_EQ(open.body, "---\nname: x\nno end\n");
  EXPECT_EQ(split_front_matter("").body, "");
}

TEST(FsFrontMatter, BadYamlIsCutOffWithNoFields) {
  FrontMatter fm = split_front_matter("---\nname: [unclosed\n---\nbody\n");
  EXPECT_TRUE(fm.present);
  EXPECT_FALSE(fm.valid);
  EXPECT_TRUE(fm.fields.empty());
  EXPECT_EQ(fm.body, "body\n");
  FrontMatter list = split_front_matter("---\n- a\n- b\n---\nbody\n");  // not a mapping
  EXPECT_FALSE(list.valid);
  EXPECT_TRUE(list.fields.empty());
  FrontMatter empty = split_front_matter("---\n---\nbody\n");
  EXPECT_TRUE(empty.present);
  EXPECT_EQ(empty.body, "body\n");
}

TEST(FsFrontMatter, AByteOrderMarkIsNoObstacle) {
  FrontMatter fm = split_front_matter("\xEF\xBB\xBF---\nname: x\n---\nb");
  EXPECT_EQ(fm.fields["name"], "x");
  EXPECT_EQ(fm.body, "b");
}

}  // namespace
}  // namespace agentbox
